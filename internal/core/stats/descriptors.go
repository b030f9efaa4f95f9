package stats

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// baseLabelKeys are the first label keys of every metric, in this order: the labels of
// kubelet's own cadvisor series (container, id, image, name, namespace, pod). With
// PodAndContainerStatsFromCRI kubelet serves /metrics/cadvisor from ListPodSandboxMetrics
// with the runtime's label keys as they are (kubelet 1.37 adds none), so without pod,
// namespace and container the series of a pod could not be told apart by the queries
// written for cadvisor's (containerd sends pod, namespace, container, id and image).
func baseLabelKeys() []string {
	return []string{"container", "id", "image", "name", "namespace", "pod"}
}

// descriptor is one metric the collector produces.
type descriptor struct {
	name string
	help string
	typ  runtimeapi.MetricType
	// extra are the label keys after baseLabelKeys.
	extra []string
}

const (
	counter = runtimeapi.MetricType_COUNTER
	gauge   = runtimeapi.MetricType_GAUGE
)

// descriptorTable lists every metric the collector can produce. CRI metric values
// are unsigned integers and kubelet exports them unscaled, so "_seconds" metrics are
// whole seconds (truncated) and byte metrics are bytes, as CRI-O reports them.
func descriptorTable() []descriptor {
	dev := []string{"device"}
	nic := []string{"interface"}
	return []descriptor{
		// CPU.
		{"container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", counter, []string{"cpu"}},
		{"container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", counter, nil},
		{"container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", counter, nil},
		{"container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", counter, nil},
		{"container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", counter, nil},
		{"container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", counter, nil},

		// Memory.
		{"container_memory_cache", "Number of bytes of page cache memory.", gauge, nil},
		{"container_memory_rss", "Size of RSS in bytes.", gauge, nil},
		{"container_memory_mapped_file", "Size of memory mapped files in bytes.", gauge, nil},
		{"container_memory_kernel_usage", "Size of kernel memory allocated in bytes.", gauge, nil},
		{"container_memory_swap", "Container swap usage in bytes.", gauge, nil},
		{"container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed.", gauge, nil},
		{"container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes.", gauge, nil},
		{"container_memory_working_set_bytes", "Current working set in bytes.", gauge, nil},
		{"container_memory_failcnt", "Number of memory usage hits limits.", counter, nil},
		{"container_memory_failures_total", "Cumulative count of memory allocation failures.", counter, []string{"failure_type", "scope"}},
		{"container_oom_events_total", "Count of out of memory events observed for the container.", counter, nil},

		// Pressure stall information (cgroup v2 files, also in a hybrid hierarchy).
		{"container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", counter, nil},
		{"container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", counter, nil},
		{"container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", counter, nil},
		{"container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", counter, nil},
		{"container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", counter, nil},
		{"container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", counter, nil},

		// Processes.
		{"container_processes", "Number of processes running inside the container.", gauge, nil},
		{"container_threads", "Number of threads running inside the container.", gauge, nil},
		{"container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero.", gauge, nil},
		{"container_file_descriptors", "Number of open file descriptors for the container.", gauge, nil},
		{"container_sockets", "Number of open sockets for the container.", gauge, nil},
		{"container_ulimits_soft", "Soft ulimit values for the container root process (only limited ones are reported).", gauge, []string{"ulimit"}},

		// Filesystem: the engine's data root holds the writable layer.
		{"container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", gauge, dev},
		{"container_fs_inodes_total", "Number of Inodes.", gauge, dev},
		{"container_fs_inodes_free", "Number of available Inodes.", gauge, dev},
		{"container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem (its writable layer).", gauge, dev},

		// Block IO, per device.
		{"container_fs_reads_bytes_total", "Cumulative count of bytes read.", counter, dev},
		{"container_fs_reads_total", "Cumulative count of reads completed.", counter, dev},
		{"container_fs_writes_bytes_total", "Cumulative count of bytes written.", counter, dev},
		{"container_fs_writes_total", "Cumulative count of writes completed.", counter, dev},
		{"container_blkio_device_usage_total", "Blkio device bytes usage.", counter, []string{"device", "major", "minor", "operation"}},

		// Pod network namespace, per interface (but the loopback).
		{"container_network_receive_bytes_total", "Cumulative count of bytes received.", counter, nic},
		{"container_network_receive_packets_total", "Cumulative count of packets received.", counter, nic},
		{"container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving.", counter, nic},
		{"container_network_receive_errors_total", "Cumulative count of errors encountered while receiving.", counter, nic},
		{"container_network_transmit_bytes_total", "Cumulative count of bytes transmitted.", counter, nic},
		{"container_network_transmit_packets_total", "Cumulative count of packets transmitted.", counter, nic},
		{"container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting.", counter, nic},
		{"container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting.", counter, nic},

		// Spec, from the engine's view of the container.
		{"container_spec_cpu_period", "CPU period of the container (microseconds).", gauge, nil},
		{"container_spec_cpu_quota", "CPU quota of the container (microseconds per period).", gauge, nil},
		{"container_spec_cpu_shares", "CPU share of the container.", gauge, nil},
		{"container_spec_memory_limit_bytes", "Memory limit for the container (0: unlimited).", gauge, nil},
		{"container_spec_memory_swap_limit_bytes", "Memory swap limit for the container (0: unlimited).", gauge, nil},

		// Times, in seconds since the epoch.
		{"container_start_time_seconds", "Start time of the container since unix epoch in seconds.", gauge, nil},
		{"container_last_seen", "Last time a container was seen by the exporter.", gauge, nil},
	}
}

// Descriptors returns the descriptors of every metric the collector produces.
func Descriptors() []*runtimeapi.MetricDescriptor {
	table := descriptorTable()
	out := make([]*runtimeapi.MetricDescriptor, 0, len(table))
	for _, d := range table {
		keys := append(baseLabelKeys(), d.extra...)
		out = append(out, &runtimeapi.MetricDescriptor{Name: d.name, Help: d.help, LabelKeys: keys})
	}
	return out
}
