package stats

import (
	"slices"
	"testing"

	"gotest.tools/v3/assert"
)

// critestExpected are the metric names critest v1.37.0 expects (pkg/validate/pod.go,
// expectedMetricDescriptorNames), and critestUnimplemented those it lets runtimes
// leave out.
var (
	critestExpected = []string{
		"container_blkio_device_usage_total", "container_cpu_cfs_periods_total",
		"container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total",
		"container_cpu_system_seconds_total", "container_cpu_usage_seconds_total",
		"container_cpu_user_seconds_total", "container_file_descriptors", "container_fs_inodes_free",
		"container_fs_inodes_total", "container_fs_limit_bytes", "container_fs_reads_bytes_total",
		"container_fs_reads_total", "container_fs_usage_bytes", "container_fs_writes_bytes_total",
		"container_fs_writes_total", "container_hugetlb_max_usage_bytes", "container_hugetlb_usage_bytes",
		"container_last_seen", "container_memory_cache", "container_memory_failcnt",
		"container_memory_failures_total", "container_memory_kernel_usage", "container_memory_mapped_file",
		"container_memory_max_usage_bytes", "container_memory_rss", "container_memory_swap",
		"container_memory_usage_bytes", "container_memory_working_set_bytes",
		"container_network_receive_bytes_total", "container_network_receive_errors_total",
		"container_network_receive_packets_dropped_total", "container_network_receive_packets_total",
		"container_network_transmit_bytes_total", "container_network_transmit_errors_total",
		"container_network_transmit_packets_dropped_total", "container_network_transmit_packets_total",
		"container_oom_events_total", "container_pressure_cpu_stalled_seconds_total",
		"container_pressure_cpu_waiting_seconds_total", "container_pressure_io_stalled_seconds_total",
		"container_pressure_io_waiting_seconds_total", "container_pressure_memory_stalled_seconds_total",
		"container_pressure_memory_waiting_seconds_total", "container_processes", "container_sockets",
		"container_spec_cpu_period", "container_spec_cpu_quota", "container_spec_cpu_shares",
		"container_spec_memory_limit_bytes", "container_spec_memory_reservation_limit_bytes",
		"container_spec_memory_swap_limit_bytes", "container_start_time_seconds", "container_threads",
		"container_threads_max", "container_ulimits_soft",
	}
	critestUnimplemented = []string{
		"container_hugetlb_max_usage_bytes", "container_hugetlb_usage_bytes",
		"container_pressure_cpu_stalled_seconds_total", "container_pressure_cpu_waiting_seconds_total",
		"container_pressure_io_stalled_seconds_total", "container_pressure_io_waiting_seconds_total",
		"container_pressure_memory_stalled_seconds_total", "container_pressure_memory_waiting_seconds_total",
		"container_spec_cpu_quota", "container_spec_memory_reservation_limit_bytes", "container_ulimits_soft",
	}
)

func TestDescriptors(t *testing.T) {
	descs := Descriptors()
	names := map[string]bool{}
	for _, d := range descs {
		assert.Check(t, !names[d.GetName()], "duplicate %s", d.GetName())
		names[d.GetName()] = true
		assert.Check(t, d.GetHelp() != "", d.GetName())
		// kubelet's cadvisor labels: in CRI stats mode kubelet serves ours as they are.
		assert.DeepEqual(t, d.GetLabelKeys()[:6], []string{"container", "id", "image", "name", "namespace", "pod"})
		// critest wants a value of every described metric but those it knows may be missing.
		assert.Check(t, slices.Contains(critestExpected, d.GetName()), "%s is not a metric critest knows", d.GetName())
	}
	for _, name := range critestExpected {
		if !slices.Contains(critestUnimplemented, name) {
			assert.Check(t, names[name], "missing descriptor %s", name)
		}
	}
	d := Descriptors()
	d[0].LabelKeys[0] = "changed"
	assert.Equal(t, Descriptors()[0].GetLabelKeys()[0], "container", "callers get copies")
}
