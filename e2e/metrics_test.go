//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// requiredMetrics are the metrics critest v1.37.0 wants a value of for a pod with a
// running container: its expected names but the unimplemented and optional ones.
var requiredMetrics = []string{
	"container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total",
	"container_cpu_cfs_throttled_seconds_total", "container_cpu_system_seconds_total",
	"container_cpu_usage_seconds_total", "container_cpu_user_seconds_total", "container_file_descriptors",
	"container_fs_inodes_free", "container_fs_inodes_total", "container_fs_limit_bytes", "container_fs_usage_bytes",
	"container_last_seen", "container_memory_cache", "container_memory_failcnt", "container_memory_failures_total",
	"container_memory_kernel_usage", "container_memory_mapped_file", "container_memory_max_usage_bytes",
	"container_memory_rss", "container_memory_swap", "container_memory_usage_bytes",
	"container_memory_working_set_bytes", "container_network_receive_bytes_total",
	"container_network_receive_errors_total", "container_network_receive_packets_dropped_total",
	"container_network_receive_packets_total", "container_network_transmit_bytes_total",
	"container_network_transmit_errors_total", "container_network_transmit_packets_dropped_total",
	"container_network_transmit_packets_total", "container_oom_events_total", "container_processes",
	"container_sockets", "container_spec_cpu_period", "container_spec_cpu_shares",
	"container_spec_memory_limit_bytes", "container_spec_memory_swap_limit_bytes",
	"container_start_time_seconds", "container_threads", "container_threads_max",
}

// TestPodSandboxMetrics reads kubelet's CRI metrics of a CNI pod running a web
// server with limits: every descriptor has help and label keys, the pod reports its
// network and the container its cgroup, processes, filesystem and limits, each value
// with as many labels as its descriptor has keys.
func TestPodSandboxMetrics(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	ctx := context.Background()

	pod := podConfig("metrics")
	pod.LogDirectory = t.TempDir()
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	cfg := httpdContainer("httpd", "8080", "httpd.log")
	cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{
		CpuPeriod: 100000, CpuQuota: 20000, CpuShares: 1024,
		MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 64 << 20,
	}
	id := startContainer(t, s, podID, pod, cfg)
	waitHTTP(t, "http://"+net.JoinHostPort(podStatus(t, s, podID).GetNetwork().GetIp(), "8080")+"/")

	descs, err := s.rt.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
	assert.NilError(t, err)
	keys := map[string]int{}
	for _, d := range descs.GetDescriptors() {
		assert.Check(t, d.GetHelp() != "" && len(d.GetLabelKeys()) > 0, d.GetName())
		keys[d.GetName()] = len(d.GetLabelKeys())
	}

	// The writable layer's size (container_fs_usage_bytes) is measured in the
	// background: the first measurement comes within a period (10 s) of the first ask.
	var pm *runtimeapi.PodSandboxMetrics
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := s.rt.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
		if err != nil {
			return poll.Error(err)
		}
		pm = nil
		for _, m := range resp.GetPodMetrics() {
			if m.GetPodSandboxId() == podID {
				pm = m
			}
		}
		if pm == nil {
			return poll.Error(fmt.Errorf("no metrics of pod %s", podID))
		}
		for _, cm := range pm.GetContainerMetrics() {
			for _, m := range cm.GetMetrics() {
				if m.GetName() == "container_fs_usage_bytes" {
					return poll.Success()
				}
			}
		}
		return poll.Continue("no container_fs_usage_bytes yet")
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(500*time.Millisecond))
	// values are the first value of each metric, by name.
	values := map[string]uint64{}
	check := func(ms []*runtimeapi.Metric) {
		for _, m := range ms {
			n, ok := keys[m.GetName()]
			assert.Check(t, ok, "undescribed %s", m.GetName())
			assert.Check(t, len(m.GetLabelValues()) == n, "%s: %v", m.GetName(), m.GetLabelValues())
			if _, seen := values[m.GetName()]; !seen {
				values[m.GetName()] = m.GetValue().GetValue()
			}
		}
	}
	check(pm.GetMetrics())
	for _, m := range pm.GetMetrics() {
		if strings.HasPrefix(m.GetName(), "container_network_") {
			assert.Check(t, m.GetLabelValues()[len(m.GetLabelValues())-1] != "lo", "loopback reported")
		}
	}
	assert.Equal(t, len(pm.GetContainerMetrics()), 1)
	cm := pm.GetContainerMetrics()[0]
	assert.Equal(t, cm.GetContainerId(), id)
	check(cm.GetMetrics())

	for _, name := range requiredMetrics {
		_, ok := values[name]
		assert.Check(t, ok, "no value of %s", name)
	}
	assert.Check(t, values["container_network_receive_bytes_total"] > 0)
	assert.Equal(t, values["container_spec_cpu_period"], uint64(100000))
	assert.Equal(t, values["container_spec_cpu_quota"], uint64(20000))
	assert.Equal(t, values["container_spec_memory_limit_bytes"], uint64(64<<20))
	assert.Check(t, values["container_processes"] >= 1)
	assert.Check(t, values["container_threads"] >= values["container_processes"])
	assert.Check(t, values["container_sockets"] >= 1, "the server's listening socket")
	assert.Check(t, values["container_memory_usage_bytes"] > 0)
	assert.Check(t, values["container_fs_limit_bytes"] > 0)
	started := time.Unix(int64(values["container_start_time_seconds"]), 0)
	assert.Check(t, time.Since(started) < 5*time.Minute, "started %s", started)
}
