package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockpin/cri-dockerd/core/imagecache"
)

// ImageCacheStats is what the image cache metrics read at each scrape (an *imagecache.Cache).
type ImageCacheStats interface {
	Stats() imagecache.Stats
}

// WatchImageCache registers the image cache metrics, read from c at each scrape.
func (m *Metrics) WatchImageCache(c ImageCacheStats) {
	m.reg.MustRegister(&cacheCollector{
		cache:      c,
		images:     desc("image_cache_images", "Images in the image cache's index."),
		state:      desc("image_cache_state", "1 for the state the image cache is in (starting, live: answering from its index, fallback: calling the engine), 0 for the others.", "state"),
		resyncs:    desc("image_cache_resyncs_total", "Full reconciliations of the index with the engine's image list."),
		events:     desc("image_cache_events_total", "Image events from the engine applied to the index."),
		reconnects: desc("image_cache_reconnects_total", "Reconnections of the engine's event stream."),
		lastResync: desc("image_cache_last_resync_timestamp_seconds", "When the index was last reconciled with the engine (absent before the first)."),
	})
}

// cacheCollector turns imagecache.Stats into metrics when scraped.
type cacheCollector struct {
	cache                                                  ImageCacheStats
	images, state, resyncs, events, reconnects, lastResync *prometheus.Desc
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.images, c.state, c.resyncs, c.events, c.reconnects, c.lastResync} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.cache.Stats()
	gauge(ch, c.images, float64(st.Images))
	stateSet(ch, c.state, st.State, imagecache.States())
	for d, v := range map[*prometheus.Desc]int{c.resyncs: st.Resyncs, c.events: st.Events, c.reconnects: st.Reconnects} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if !st.LastResync.IsZero() {
		gauge(ch, c.lastResync, seconds(st.LastResync))
	}
}
