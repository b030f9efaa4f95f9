package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
)

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
