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
	m.reg.MustRegister(&streamCollector{
		streams: s,
		open:    desc("streaming_sessions", "Streaming sessions running now, by kind (exec, attach, portforward).", "kind"),
	})
}

type streamCollector struct {
	streams OpenSessions
	open    *prometheus.Desc
}

func (c *streamCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.open }

func (c *streamCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range c.streams.OpenSessions() {
		gauge(ch, c.open, float64(n), kind)
	}
}
