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
	images := desc("pin_evaluation_images", "Images in the most recent pin evaluation (ListImages or ImageStatus).")
	pinned := desc("pin_evaluation_pinned_images", "Images pinned by any source in the most recent pin evaluation.")
	bySource := desc("pinned_images", "Images pinned in the most recent pin evaluation, by source (an image counts once for each of its sources).", "source")
	evaluatedAt := desc("pin_evaluation_timestamp_seconds", "When the most recent pin evaluation ran (absent before the first).")
	sourceState := desc("pin_source_state", "1 for the state a pin source is in (healthy, stale, expired, never read), 0 for the others.", "source", "state")
	refreshed := desc("pin_source_last_refresh_timestamp_seconds", "When a pin source last answered (or its saved state was taken); its staleness is time() minus this.", "source")
	preloadArchives := desc("preload_archives", "Preload archives of this start, by where their pins come from (loaded; manifest: not loaded, read; saved: unreadable, as at their last good load; none: pinning nothing).", "origin")
	preloadRefs := desc("preload_pinned_refs", "References the preload archives pin, by origin (as cri_dockerd_preload_archives).", "origin")
	m.reg.MustRegister(scrapeCollector{
		descs: []*prometheus.Desc{images, pinned, bySource, evaluatedAt, sourceState, refreshed, preloadArchives, preloadRefs},
		collect: func(ch chan<- prometheus.Metric) {
			h := p.Health()
			gauge(ch, images, float64(h.Images))
			gauge(ch, pinned, float64(h.Pinned))
			for src, n := range h.PinnedBySource {
				gauge(ch, bySource, float64(n), src)
			}
			if !h.EvaluatedAt.IsZero() {
				gauge(ch, evaluatedAt, seconds(h.EvaluatedAt))
			}
			for origin, n := range h.PreloadArchives {
				gauge(ch, preloadArchives, float64(n), origin)
				gauge(ch, preloadRefs, float64(h.PreloadRefs[origin]), origin)
			}
			for _, s := range h.Sources {
				stateSet(ch, sourceState, s.State, pinning.SourceStates(), s.Name)
				if !s.LastRefresh.IsZero() {
					gauge(ch, refreshed, seconds(s.LastRefresh), s.Name)
				}
			}
		},
	})
}

// scrapeCollector computes its metrics at each scrape with collect, which reads its
// source once; descs are the metrics it may report.
type scrapeCollector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c scrapeCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// counter reports v for the counter d.
func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
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
