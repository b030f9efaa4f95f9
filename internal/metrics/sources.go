package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockpin/cri-dockerd/internal/core/imagecache"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// PinHealth is what the pin metrics read at each scrape (a *pinner.Pinner).
type PinHealth interface {
	Health() pinner.Health
}

// WatchPins registers the pin metrics, read from p at each scrape.
func (m *Metrics) WatchPins(p PinHealth) {
	images := desc("pin_evaluation_images", "Images in the most recent pin evaluation (ListImages or ImageStatus).")
	pinned := desc("pin_evaluation_pinned_images", "Images pinned by any source in the most recent pin evaluation.")
	bySource := desc("pinned_images", "Images pinned in the most recent pin evaluation, by source (an image counts once for each of its sources).", "source")
	evaluatedAt := desc("pin_evaluation_timestamp_seconds", "When the most recent pin evaluation ran (absent before the first).")
	sourceState := desc("pin_source_state", "1 for the state a pin source is in (healthy, stale, expired, never read), 0 for the others.", "source", "state")
	refreshed := desc("pin_source_last_refresh_timestamp_seconds", "When a pin source last answered (or its saved state was taken); its staleness is time() minus this.", "source")
	preloadArchives := desc("preload_archives", "Files of the preload directory (archives and .txt lists), by where their pins come from (loaded; manifest: not loaded (yet), read; saved: not loaded (yet, or unreadable), as at their last good load; listed: a list; none: pinning nothing (yet)).", "origin")
	preloadRefs := desc("preload_pinned_refs", "References the preload archives pin, by origin (as cri_dockerd_preload_archives).", "origin")
	preloadStates := desc("preload_files", "Files of the preload directory by state (pending, loaded, failed, ...).", "state")
	preloadFailures := desc("preload_load_failures", "Failed loads in a row of the preload archives failing now, summed (each is retried with backoff; crictl info shows when).")
	preloadUnread := desc("preload_unread_files", "Preload files present at start whose content is not read yet; while above 0 every image is reported pinned.")
	m.reg.MustRegister(scrapeCollector{
		descs: []*prometheus.Desc{images, pinned, bySource, evaluatedAt, sourceState, refreshed, preloadArchives, preloadRefs,
			preloadStates, preloadFailures, preloadUnread},
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
			for state, n := range h.PreloadStates {
				gauge(ch, preloadStates, float64(n), state)
			}
			gauge(ch, preloadFailures, float64(h.PreloadLoadFailures))
			gauge(ch, preloadUnread, float64(h.PreloadUnread))
			for _, s := range h.Sources {
				stateSet(ch, sourceState, s.State, pinner.SourceStates(), s.Name)
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

// ImageCacheStats is what the image cache metrics read at each scrape (an *imagecache.Cache).
type ImageCacheStats interface {
	Stats() imagecache.Stats
}

// WatchImageCache registers the image cache metrics, read from c at each scrape.
func (m *Metrics) WatchImageCache(c ImageCacheStats) {
	images := desc("image_cache_images", "Images in the image cache's index.")
	state := desc("image_cache_state", "1 for the state the image cache is in (starting, live: answering from its index, fallback: calling the engine), 0 for the others.", "state")
	resyncs := desc("image_cache_resyncs_total", "Full reconciliations of the index with the engine's image list.")
	events := desc("image_cache_events_total", "Image events from the engine applied to the index.")
	reconnects := desc("image_cache_reconnects_total", "Reconnections of the engine's event stream.")
	lastResync := desc("image_cache_last_resync_timestamp_seconds", "When the index was last reconciled with the engine (absent before the first).")
	m.reg.MustRegister(scrapeCollector{
		descs: []*prometheus.Desc{images, state, resyncs, events, reconnects, lastResync},
		collect: func(ch chan<- prometheus.Metric) {
			st := c.Stats()
			gauge(ch, images, float64(st.Images))
			stateSet(ch, state, st.State, imagecache.States())
			counter(ch, resyncs, float64(st.Resyncs))
			counter(ch, events, float64(st.Events))
			counter(ch, reconnects, float64(st.Reconnects))
			if !st.LastResync.IsZero() {
				gauge(ch, lastResync, seconds(st.LastResync))
			}
		},
	})
}

// LogStats is what the log copier metrics read at each scrape (a *logs.Manager).
type LogStats interface {
	Stats() logs.Stats
}

// WatchLogs registers the log copier metrics, read from l at each scrape.
func (m *Metrics) WatchLogs(l LogStats) {
	copying := desc("log_copiers", "Containers whose engine log is being copied into their CRI log file now.")
	lines := desc("log_lines_written_total", "CRI log lines (full or partial) written.")
	bytes := desc("log_bytes_written_total", "Bytes of CRI log lines written.")
	dropped := desc("log_lines_dropped_total", "CRI log lines that could not be written (a full disk, say).")
	m.reg.MustRegister(scrapeCollector{
		descs: []*prometheus.Desc{copying, lines, bytes, dropped},
		collect: func(ch chan<- prometheus.Metric) {
			st := l.Stats()
			gauge(ch, copying, float64(st.Copying))
			counter(ch, lines, float64(st.Lines))
			counter(ch, bytes, float64(st.Bytes))
			counter(ch, dropped, float64(st.Dropped))
		},
	})
}

// OpenSessions is what the streaming metric reads at each scrape (a *streaming.Server).
type OpenSessions interface {
	OpenSessions() map[string]int64
}

// WatchStreaming registers cri_dockerd_streaming_sessions, read from s at each scrape.
func (m *Metrics) WatchStreaming(s OpenSessions) {
	open := desc("streaming_sessions", "Streaming sessions running now, by kind (exec, attach, portforward).", "kind")
	m.reg.MustRegister(scrapeCollector{
		descs: []*prometheus.Desc{open},
		collect: func(ch chan<- prometheus.Metric) {
			for kind, n := range s.OpenSessions() {
				gauge(ch, open, float64(n), kind)
			}
		},
	})
}
