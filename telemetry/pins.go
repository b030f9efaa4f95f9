package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockpin/cri-dockerd/pinning"
)

// PinHealth is what the pin metrics read at each scrape (a *pinning.Pinner).
type PinHealth interface {
	Health() pinning.Health
}

// WatchPins registers the pin metrics, read from p at each scrape.
func (m *Metrics) WatchPins(p PinHealth) {
	m.reg.MustRegister(newPinCollector(p))
}

// pinCollector turns pinning.Health into metrics when scraped.
type pinCollector struct {
	pins                                                          PinHealth
	images, pinned, bySource, evaluatedAt, sourceState, refreshed *prometheus.Desc
	preloadArchives, preloadRefs                                  *prometheus.Desc
}

func newPinCollector(p PinHealth) *pinCollector {
	d := desc
	return &pinCollector{
		pins:            p,
		images:          d("pin_evaluation_images", "Images in the most recent pin evaluation (ListImages or ImageStatus)."),
		pinned:          d("pin_evaluation_pinned_images", "Images pinned by any source in the most recent pin evaluation."),
		bySource:        d("pinned_images", "Images pinned in the most recent pin evaluation, by source (an image counts once for each of its sources).", "source"),
		evaluatedAt:     d("pin_evaluation_timestamp_seconds", "When the most recent pin evaluation ran (absent before the first)."),
		sourceState:     d("pin_source_state", "1 for the state a pin source is in (healthy, stale, expired, never read), 0 for the others.", "source", "state"),
		refreshed:       d("pin_source_last_refresh_timestamp_seconds", "When a pin source last answered (or its saved state was taken); its staleness is time() minus this.", "source"),
		preloadArchives: d("preload_archives", "Preload archives of this start, by where their pins come from (loaded; manifest: not loaded, read; saved: unreadable, as at their last good load; none: pinning nothing).", "origin"),
		preloadRefs:     d("preload_pinned_refs", "References the preload archives pin, by origin (as cri_dockerd_preload_archives).", "origin"),
	}
}

func (c *pinCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.images, c.pinned, c.bySource, c.evaluatedAt, c.sourceState, c.refreshed, c.preloadArchives, c.preloadRefs} {
		ch <- d
	}
}

func (c *pinCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.pins.Health()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) { gauge(ch, d, v, labels...) }
	gauge(c.images, float64(h.Images))
	gauge(c.pinned, float64(h.Pinned))
	for src, n := range h.PinnedBySource {
		gauge(c.bySource, float64(n), src)
	}
	if !h.EvaluatedAt.IsZero() {
		gauge(c.evaluatedAt, seconds(h.EvaluatedAt))
	}
	for origin, n := range h.PreloadArchives {
		gauge(c.preloadArchives, float64(n), origin)
		gauge(c.preloadRefs, float64(h.PreloadRefs[origin]), origin)
	}
	for _, s := range h.Sources {
		stateSet(ch, c.sourceState, s.State, pinning.SourceStates(), s.Name)
		if !s.LastRefresh.IsZero() {
			gauge(c.refreshed, seconds(s.LastRefresh), s.Name)
		}
	}
}

// desc describes the metric cri_dockerd_<name>.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// gauge sends a gauge sample of d.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// stateSet sends d for each of states, 1 for current and 0 for the others; labels come
// before the state label.
func stateSet(ch chan<- prometheus.Metric, d *prometheus.Desc, current string, states []string, labels ...string) {
	for _, st := range states {
		v := 0.0
		if st == current {
			v = 1
		}
		gauge(ch, d, v, append(labels[:len(labels):len(labels)], st)...)
	}
}

// seconds is t as a Unix timestamp in seconds.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
