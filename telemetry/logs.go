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
