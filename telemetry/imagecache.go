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
