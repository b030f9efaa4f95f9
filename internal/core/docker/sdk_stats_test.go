package docker

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestContainerStats(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want ContainerStats
	}{
		{
			name: "cgroup v2",
			body: `{"read":"2024-05-01T10:00:00Z","pids_stats":{"current":7},
			 "cpu_stats":{"cpu_usage":{"total_usage":123456789}},
			 "memory_stats":{"usage":10000,"stats":{"inactive_file":3000,"anon":6000,"file":4000,"pgfault":11,"pgmajfault":2}},
			 "networks":{"eth0":{"rx_bytes":100,"rx_errors":1,"tx_bytes":200,"tx_errors":2,"rx_packets":9}}}`,
			want: ContainerStats{
				Timestamp: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC), CPUUsageNanos: 123456789,
				MemoryUsageBytes: 10000, MemoryWorkingSetBytes: 7000, MemoryRSSBytes: 6000,
				PageFaults: 11, MajorPageFaults: 2, Pids: 7,
				Networks: map[string]NetworkStats{"eth0": {RxBytes: 100, RxErrors: 1, TxBytes: 200, TxErrors: 2}},
			},
		},
		{
			name: "cgroup v1 hierarchical totals",
			body: `{"read":"2024-05-01T10:00:00Z","cpu_stats":{"cpu_usage":{"total_usage":5}},
			 "memory_stats":{"usage":10000,"stats":{"inactive_file":100,"total_inactive_file":2500,"rss":1000,"total_rss":4000,
			  "pgfault":1,"total_pgfault":21,"pgmajfault":1,"total_pgmajfault":3}}}`,
			want: ContainerStats{
				Timestamp: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC), CPUUsageNanos: 5,
				MemoryUsageBytes: 10000, MemoryWorkingSetBytes: 7500, MemoryRSSBytes: 4000,
				PageFaults: 21, MajorPageFaults: 3,
			},
		},
		{
			name: "cgroup v1 without totals",
			body: `{"read":"2024-05-01T10:00:00Z","memory_stats":{"usage":10000,"stats":{"inactive_file":100,"rss":1000}}}`,
			want: ContainerStats{
				Timestamp:        time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
				MemoryUsageBytes: 10000, MemoryWorkingSetBytes: 9900, MemoryRSSBytes: 1000,
			},
		},
		{
			name: "working set never below zero",
			body: `{"read":"2024-05-01T10:00:00Z","memory_stats":{"usage":1000,"stats":{"inactive_file":5000}}}`,
			want: ContainerStats{Timestamp: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC), MemoryUsageBytes: 1000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var query map[string][]string
			c := routedEngine(t, map[string]http.HandlerFunc{
				"GET /containers/abc/stats": func(w http.ResponseWriter, r *http.Request) {
					query = r.URL.Query()
					_, _ = io.WriteString(w, tc.body)
				},
			})
			got, err := c.ContainerStats(context.Background(), "abc")
			assert.NilError(t, err)
			assert.DeepEqual(t, got, tc.want)
			assert.DeepEqual(t, query["one-shot"], []string{"1"})
			assert.DeepEqual(t, query["stream"], []string{"0"})
		})
	}
}
