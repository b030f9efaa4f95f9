package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockpin/cri-dockerd/core/logs"
)

// LogStats is what the log copier metrics read at each scrape (a *logs.Manager).
type LogStats interface {
	Stats() logs.Stats
}

// WatchLogs registers the log copier metrics, read from l at each scrape.
func (m *Metrics) WatchLogs(l LogStats) {
	m.reg.MustRegister(&logCollector{
		logs:    l,
		copying: desc("log_copiers", "Containers whose engine log is being copied into their CRI log file now."),
		lines:   desc("log_lines_written_total", "CRI log lines (full or partial) written."),
		bytes:   desc("log_bytes_written_total", "Bytes of CRI log lines written."),
		dropped: desc("log_lines_dropped_total", "CRI log lines that could not be written (a full disk, say)."),
	})
}

type logCollector struct {
	logs                           LogStats
	copying, lines, bytes, dropped *prometheus.Desc
}

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.copying, c.lines, c.bytes, c.dropped} {
		ch <- d
	}
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.logs.Stats()
	gauge(ch, c.copying, float64(st.Copying))
	for d, v := range map[*prometheus.Desc]int64{c.lines: st.Lines, c.bytes: st.Bytes, c.dropped: st.Dropped} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
}
