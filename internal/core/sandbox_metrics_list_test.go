package core

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/stats"
)

// rtMetricsHost is a fake host tree (cgroup v2) for the metrics collector: the
// engine fake's pids get /proc entries only when added.
type rtMetricsHost struct {
	root string
}

// newRTMetrics points env's service at a collector reading a fake host tree.
func newRTMetrics(t *testing.T, env *rtEnv) *rtMetricsHost {
	t.Helper()
	h := &rtMetricsHost{root: t.TempDir()}
	h.write(t, "sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n")
	// The engine's data root, on whatever filesystem the temp dir is.
	assert.NilError(t, os.MkdirAll(filepath.Join(h.root, env.dockerRoot), 0o755))
	env.svc.deps.Metrics = stats.NewCollector(h.root)
	return h
}

func (h *rtMetricsHost) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(h.root, rel)
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
}

// addProcess gives container id (running as pid) a process, a cgroup v2 directory
// and, for a sandbox, network counters.
func (h *rtMetricsHost) addProcess(t *testing.T, id string, pid int, cpuUsec uint64) {
	t.Helper()
	proc := "proc/" + strconv.Itoa(pid) + "/"
	cg := "sys/fs/cgroup/docker/" + id + "/"
	h.write(t, proc+"cgroup", "0::/docker/"+id+"\n")
	h.write(t, proc+"net/dev", "Inter-| Receive | Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n"+
		"    lo: 10 1 0 0 0 0 0 0 10 1 0 0 0 0 0 0\n  eth0: 5000 50 0 1 0 0 0 0 4000 40 0 2 0 0 0 0\n")
	assert.NilError(t, os.MkdirAll(filepath.Join(h.root, proc, "task", strconv.Itoa(pid)), 0o755))
	assert.NilError(t, os.MkdirAll(filepath.Join(h.root, proc, "fd"), 0o755))
	h.write(t, cg+"cgroup.procs", strconv.Itoa(pid)+"\n")
	h.write(t, cg+"cpu.stat", "usage_usec "+strconv.FormatUint(cpuUsec, 10)+"\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
	h.write(t, cg+"memory.current", "1048576\n")
	h.write(t, cg+"memory.stat", "anon 524288\nfile 0\nfile_mapped 0\nkernel 0\ninactive_file 0\npgfault 1\npgmajfault 0\n")
	h.write(t, cg+"pids.max", "max\n")
}

// rtMetricsByName indexes one container's (or pod's) metrics by name and extra labels.
func rtMetricsByName(t *testing.T, ms []*runtimeapi.Metric) map[string]*runtimeapi.Metric {
	t.Helper()
	keys := map[string]int{}
	for _, d := range stats.Descriptors() {
		keys[d.GetName()] = len(d.GetLabelKeys())
	}
	out := map[string]*runtimeapi.Metric{}
	for _, m := range ms {
		n, ok := keys[m.GetName()]
		assert.Check(t, ok, "undescribed %s", m.GetName())
		assert.Check(t, len(m.GetLabelValues()) == n, "%s: %v", m.GetName(), m.GetLabelValues())
		k := m.GetName()
		for _, l := range m.GetLabelValues()[6:] { // after container, id, image, name, namespace, pod
			k += "/" + l
		}
		out[k] = m
	}
	return out
}

func TestListMetricDescriptors(t *testing.T) {
	env := newRTEnv(t)
	_, err := env.svc.ListMetricDescriptors(context.Background(), &runtimeapi.ListMetricDescriptorsRequest{})
	assert.Check(t, cerrdefs.IsNotImplemented(err), "without a collector: %v", err)

	newRTMetrics(t, env)
	resp, err := env.svc.ListMetricDescriptors(context.Background(), &runtimeapi.ListMetricDescriptorsRequest{})
	assert.NilError(t, err)
	assert.Equal(t, len(resp.Descriptors), len(stats.Descriptors()))
	for _, d := range resp.Descriptors {
		assert.Check(t, d.GetHelp() != "" && len(d.GetLabelKeys()) > 0, d.GetName())
	}
}

func TestListPodSandboxMetrics(t *testing.T) {
	env := newRTEnv(t)
	host := newRTMetrics(t, env)
	ctx := context.Background()

	sbID, sbCfg := env.webSandbox(t)
	appCfg := rtContainerConfig("app")
	appCfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		CpuPeriod: 100000, CpuQuota: 20000, CpuShares: 512, MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 64 << 20,
	}}
	app := env.createContainer(t, sbID, sbCfg, appCfg)
	env.startContainer(t, app)
	gone := env.createContainer(t, sbID, sbCfg, rtContainerConfig("gone")) // runs, but its process is gone
	env.startContainer(t, gone)
	env.createContainer(t, sbID, sbCfg, rtContainerConfig("created")) // never started
	env.engine.SetWritableSize(app, 40960)
	host.addProcess(t, sbID, env.inspect(t, sbID).Pid, 0)
	host.addProcess(t, app, env.inspect(t, app).Pid, 3500000)

	hostCfg := rtHostNetwork(rtSandboxConfig("node"))
	hostSb := env.runSandbox(t, hostCfg)
	agent := env.runContainer(t, hostSb, hostCfg, "agent")
	host.addProcess(t, hostSb, env.inspect(t, hostSb).Pid, 0)
	host.addProcess(t, agent, env.inspect(t, agent).Pid, 0)

	stoppedCfg := rtSandboxConfig("stopped")
	stopped := env.runSandbox(t, stoppedCfg)
	host.addProcess(t, stopped, env.inspect(t, stopped).Pid, 0)
	assert.NilError(t, stopSandbox(env, stopped))

	resp, err := env.svc.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	assert.NilError(t, err)
	byPod := map[string]*runtimeapi.PodSandboxMetrics{}
	for _, pm := range resp.PodMetrics {
		byPod[pm.PodSandboxId] = pm
	}
	assert.Equal(t, len(byPod), 2, "running sandboxes only")

	// The pod: its network, labelled as the pod's "POD" container.
	web := byPod[sbID]
	assert.Assert(t, web != nil)
	pod := rtMetricsByName(t, web.Metrics)
	rx := pod["container_network_receive_bytes_total/eth0"]
	assert.Assert(t, rx != nil, "%v", pod)
	assert.DeepEqual(t, rx.LabelValues, []string{"POD", sbID, rtSandboxImage, env.inspect(t, sbID).Name, "default", "web", "eth0"})
	assert.Equal(t, rx.GetValue().GetValue(), uint64(5000))
	assert.Equal(t, pod["container_network_transmit_packets_dropped_total/eth0"].GetValue().GetValue(), uint64(2))
	_, lo := pod["container_network_receive_bytes_total/lo"]
	assert.Check(t, !lo)

	// Its containers: the running one with a process; the vanished and created ones left out.
	assert.Equal(t, len(web.ContainerMetrics), 1)
	cm := web.ContainerMetrics[0]
	assert.Equal(t, cm.ContainerId, app)
	got := rtMetricsByName(t, cm.Metrics)
	cpu := got["container_cpu_usage_seconds_total/total"]
	assert.Assert(t, cpu != nil)
	assert.DeepEqual(t, cpu.LabelValues, []string{"app", app, rtContainerImage, env.inspect(t, app).Name, "default", "web", "total"})
	assert.Equal(t, cpu.GetValue().GetValue(), uint64(3), "whole seconds")
	assert.Equal(t, cpu.MetricType, runtimeapi.MetricType_COUNTER)
	for name, want := range map[string]uint64{
		"container_spec_cpu_period":              100000,
		"container_spec_cpu_quota":               20000,
		"container_spec_cpu_shares":              512,
		"container_spec_memory_limit_bytes":      64 << 20,
		"container_spec_memory_swap_limit_bytes": 64 << 20,
		"container_memory_usage_bytes":           1 << 20,
		"container_memory_rss":                   512 << 10,
		"container_processes":                    1,
		"container_threads":                      1,
		"container_threads_max":                  0,
		"container_start_time_seconds":           uint64(env.inspect(t, app).StartedAt.Unix()),
	} {
		m, ok := got[name]
		if assert.Check(t, ok, "no %s", name) {
			assert.Check(t, m.GetValue().GetValue() == want, "%s = %d, want %d", name, m.GetValue().GetValue(), want)
		}
	}
	var usage *runtimeapi.Metric
	for _, m := range cm.Metrics {
		if m.GetName() == "container_fs_usage_bytes" {
			usage = m
		}
	}
	assert.Assert(t, usage != nil, "writable layer size reported")
	assert.Equal(t, usage.GetValue().GetValue(), uint64(40960))
	_, network := got["container_network_receive_bytes_total/eth0"]
	assert.Check(t, !network, "network counters are the pod's")

	// A pod on the node's network has no network metrics of its own.
	node := byPod[hostSb]
	assert.Assert(t, node != nil)
	assert.Equal(t, len(node.Metrics), 0)
	assert.Equal(t, len(node.ContainerMetrics), 1)
	assert.Equal(t, node.ContainerMetrics[0].ContainerId, agent)
}

func TestListPodSandboxMetricsSkipsVanishedSandbox(t *testing.T) {
	env := newRTEnv(t)
	host := newRTMetrics(t, env)
	sbCfg := rtSandboxConfig("web")
	sbID := env.runSandbox(t, sbCfg) // no process in the host tree: it exited meanwhile
	app := env.runContainer(t, sbID, sbCfg, "app")
	host.addProcess(t, app, env.inspect(t, app).Pid, 0)

	other := env.runSandbox(t, rtSandboxConfig("other"))
	host.addProcess(t, other, env.inspect(t, other).Pid, 0)

	resp, err := env.svc.ListPodSandboxMetrics(context.Background(), &runtimeapi.ListPodSandboxMetricsRequest{})
	assert.NilError(t, err)
	assert.Equal(t, len(resp.PodMetrics), 1)
	assert.Equal(t, resp.PodMetrics[0].PodSandboxId, other)
	assert.Equal(t, len(resp.PodMetrics[0].ContainerMetrics), 0)
}

func TestListPodSandboxMetricsErrors(t *testing.T) {
	env := newRTEnv(t)
	_, err := env.svc.ListPodSandboxMetrics(context.Background(), &runtimeapi.ListPodSandboxMetricsRequest{})
	assert.Check(t, cerrdefs.IsNotImplemented(err), "without a collector: %v", err)

	newRTMetrics(t, env)
	env.runSandbox(t, rtSandboxConfig("web"))
	env.engine.SetDown(true)
	_, err = env.svc.ListPodSandboxMetrics(context.Background(), &runtimeapi.ListPodSandboxMetricsRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "engine down: %v", err)
}

// fakeLayers is a LayerSizer whose measurements the test sets.
type fakeLayers struct {
	mu       sync.Mutex
	measured map[string]stats.Layer
}

func (f *fakeLayers) Get(id string, _ int, _ string, _ time.Time) (stats.Layer, bool) {
	return f.Last(id)
}

func (f *fakeLayers) Last(id string) (stats.Layer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.measured[id]
	return m, ok
}

func (f *fakeLayers) set(id string, bytes uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.measured[id] = stats.Layer{Bytes: bytes, Inodes: 1, Time: time.Now()}
}

// container_fs_usage_bytes comes from the engine's sizes while a container has no
// background measurement (critest asks right after the start), then from the
// measurement, without the size list that makes the engine walk every layer.
func TestListPodSandboxMetricsWritableLayer(t *testing.T) {
	env := newRTEnv(t)
	host := newRTMetrics(t, env)
	layers := &fakeLayers{measured: map[string]stats.Layer{}}
	env.svc.deps.Layers = layers
	sbID, sbCfg := env.webSandbox(t)
	app := env.runContainer(t, sbID, sbCfg, "app")
	env.engine.SetWritableSize(app, 40960)
	host.addProcess(t, sbID, env.inspect(t, sbID).Pid, 0)
	host.addProcess(t, app, env.inspect(t, app).Pid, 0)
	fsUsage := func() (uint64, bool) {
		t.Helper()
		resp, err := env.svc.ListPodSandboxMetrics(context.Background(), &runtimeapi.ListPodSandboxMetricsRequest{})
		assert.NilError(t, err)
		assert.Assert(t, is.Len(resp.PodMetrics, 1))
		assert.Assert(t, is.Len(resp.PodMetrics[0].ContainerMetrics, 1))
		for _, m := range resp.PodMetrics[0].ContainerMetrics[0].Metrics {
			if m.GetName() == "container_fs_usage_bytes" {
				return m.GetValue().GetValue(), true
			}
		}
		return 0, false
	}
	lists := env.engine.Calls("ListContainers")
	v, ok := fsUsage()
	assert.Check(t, ok && v == 40960, "the engine's size before a measurement: %d %v", v, ok)
	assert.Check(t, is.Equal(env.engine.Calls("ListContainers")-lists, 3), "sandboxes, containers, containers with sizes")

	layers.set(app, 8192)
	lists = env.engine.Calls("ListContainers")
	v, ok = fsUsage()
	assert.Check(t, ok && v == 8192, "the measurement: %d %v", v, ok)
	assert.Check(t, is.Equal(env.engine.Calls("ListContainers")-lists, 2), "no size list once measured")
}
