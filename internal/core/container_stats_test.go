package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/stats"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// rtSample is a stats sample whose counters are multiples of n.
func rtSample(n uint64, at time.Time) docker.ContainerStats {
	return docker.ContainerStats{
		Timestamp: at, CPUUsageNanos: 1000 * n, MemoryUsageBytes: 100 * n, MemoryWorkingSetBytes: 80 * n,
		MemoryRSSBytes: 50 * n, PageFaults: 10 * n, MajorPageFaults: n, Pids: n,
	}
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

func TestContainerStats(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cfg := rtContainerConfig("app")
	cfg.Annotations = map[string]string{"note": "n"}
	cid := env.createContainer(t, sbID, sbCfg, cfg)
	ctx := context.Background()

	// Created: attributes only.
	attrs := &runtimeapi.ContainerAttributes{
		Id: cid, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Labels: map[string]string{labelContainerName: "app"}, Annotations: map[string]string{"note": "n"},
	}
	resp, err := env.svc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.NilError(t, err)
	if diff := cmp.Diff(&runtimeapi.ContainerStats{Attributes: attrs}, resp.Stats, protocmp.Transform()); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}

	env.startContainer(t, cid)
	at := time.Unix(1700000000, 5)
	env.engine.SetStats(cid, rtSample(3, at))
	resp, err = env.svc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.NilError(t, err)
	want := &runtimeapi.ContainerStats{
		Attributes: attrs,
		Cpu:        &runtimeapi.CpuUsage{Timestamp: at.UnixNano(), UsageCoreNanoSeconds: u64(3000), UsageNanoCores: u64(0)}, // a first sample
		Memory: &runtimeapi.MemoryUsage{
			Timestamp: at.UnixNano(), WorkingSetBytes: u64(240), UsageBytes: u64(300), RssBytes: u64(150),
			PageFaults: u64(30), MajorPageFaults: u64(3),
		},
	}
	if diff := cmp.Diff(want, resp.Stats, protocmp.Transform()); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}

	assert.NilError(t, stopContainer(env, cid, 0))
	resp, err = env.svc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.Check(t, resp.Stats.Cpu == nil && resp.Stats.Memory == nil, "exited: %v", resp.Stats)

	for _, bad := range []string{"0123456789abcdef", sbID} {
		_, err := env.svc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: bad})
		assert.Check(t, cerrdefs.IsNotFound(err), "%s: %v", bad, err)
	}
}

func TestContainerStatsEngineError(t *testing.T) {
	env := newRTEnv(t)
	_, cid := runningContainer(t, env)
	env.engine.InjectError("ContainerStats", cerrdefs.ErrUnavailable)
	_, err := env.svc.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	_, err = env.svc.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

func TestListContainerStats(t *testing.T) {
	env := newRTEnv(t)
	webCfg := rtSandboxConfig("web")
	web := env.runSandbox(t, webCfg)
	dbCfg := rtSandboxConfig("db")
	db := env.runSandbox(t, dbCfg)
	appCfg := rtContainerConfig("app")
	appCfg.Labels["tier"] = "front"
	app := env.createContainer(t, web, webCfg, appCfg)
	env.startContainer(t, app)
	created := env.createContainer(t, web, webCfg, rtContainerConfig("sidecar"))
	sql := env.runContainer(t, db, dbCfg, "sql")
	at := time.Now()
	env.engine.SetStats(app, rtSample(1, at))
	env.engine.SetStats(sql, rtSample(2, at))

	list := func(f *runtimeapi.ContainerStatsFilter) map[string]*runtimeapi.ContainerStats {
		t.Helper()
		resp, err := env.svc.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{Filter: f})
		assert.NilError(t, err)
		out := map[string]*runtimeapi.ContainerStats{}
		for _, s := range resp.Stats {
			out[s.Attributes.Id] = s
		}
		return out
	}
	keys := func(m map[string]*runtimeapi.ContainerStats) []string {
		var ids []string
		for k := range m {
			ids = append(ids, k)
		}
		slices.Sort(ids)
		return ids
	}

	all := list(nil)
	assert.DeepEqual(t, keys(all), sorted(app, created, sql))
	assert.Equal(t, all[app].GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(1000))
	assert.Equal(t, all[sql].GetMemory().GetWorkingSetBytes().GetValue(), uint64(160))
	assert.Check(t, all[created].Cpu == nil && all[created].Memory == nil)
	assert.Equal(t, all[created].Attributes.Metadata.Name, "sidecar")

	assert.DeepEqual(t, keys(list(&runtimeapi.ContainerStatsFilter{PodSandboxId: web})), sorted(app, created))
	assert.DeepEqual(t, keys(list(&runtimeapi.ContainerStatsFilter{Id: sql})), []string{sql})
	assert.DeepEqual(t, keys(list(&runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"tier": "front"}})), []string{app})
	assert.Check(t, is.Len(list(&runtimeapi.ContainerStatsFilter{Id: web}), 0), "sandboxes are no containers")
}

// hookedCtx returns a context carrying a debug-level request logger and the hook
// that records what it logs.
func hookedCtx() (context.Context, *logtest.Hook) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	return logctx.With(context.Background(), log), hook
}

// logged reports whether hook has an entry at level whose field key is value.
func logged(hook *logtest.Hook, level logrus.Level, key, value string) bool {
	for _, e := range hook.AllEntries() {
		if e.Level == level && e.Data[key] == value {
			return true
		}
	}
	return false
}

func TestListContainerStatsLeavesOutVanishedAndFailing(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	ids := map[string]string{}
	for _, name := range []string{"keep", "gone", "broken"} {
		ids[name] = env.createContainer(t, sbID, sbCfg, rtContainerConfig(name))
		env.startContainer(t, ids[name])
		env.engine.SetStats(ids[name], rtSample(1, time.Now()))
	}
	// Removed between the list and its stats; its stats fail.
	env.engine.RemoveBefore("ContainerStats", ids["gone"])
	env.engine.InjectContainerError("ContainerStats", ids["broken"], fmt.Errorf("injected: %w", cerrdefs.ErrInternal))

	ctx, hook := hookedCtx()
	resp, err := env.svc.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	assert.NilError(t, err)
	var got []string
	for _, s := range resp.Stats {
		got = append(got, s.Attributes.Id)
	}
	assert.DeepEqual(t, got, []string{ids["keep"]})
	assert.Check(t, logged(hook, logrus.DebugLevel, "container", ids["gone"]), "%v", hook.AllEntries())
	assert.Check(t, logged(hook, logrus.WarnLevel, "container", ids["broken"]), "%v", hook.AllEntries())

	// An engine that cannot be reached fails the list: no empty answer.
	env.engine.InjectContainerError("ContainerStats", ids["broken"], fmt.Errorf("injected: %w", cerrdefs.ErrUnavailable))
	_, err = env.svc.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

// TestContainerStatsFromCgroups: with a cgroup reader (the engine on this host), a
// running container's CPU and memory come from its cgroup: one inspect to learn its
// pid, then no engine call at all; a restart (a new pid) is noticed and the pid asked
// again; a container whose cgroup cannot be read here falls back to the engine.
func TestContainerStatsFromCgroups(t *testing.T) {
	env := newRTEnv(t)
	host := newRTMetrics(t, env)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	env.startContainer(t, cid)
	host.addProcess(t, cid, env.inspect(t, cid).Pid, 3500000)
	ctx := context.Background()
	stats := func() *runtimeapi.ContainerStats {
		t.Helper()
		resp, err := env.svc.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
		assert.NilError(t, err)
		assert.Assert(t, is.Len(resp.Stats, 1))
		return resp.Stats[0]
	}
	st := stats()
	assert.Check(t, is.Equal(st.GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(3_500_000_000)))
	assert.Check(t, is.Equal(st.GetMemory().GetUsageBytes().GetValue(), uint64(1048576)))
	assert.Check(t, is.Equal(st.GetMemory().GetWorkingSetBytes().GetValue(), uint64(1048576)))
	assert.Check(t, is.Equal(st.GetMemory().GetRssBytes().GetValue(), uint64(524288)))
	inspects, engineStats := env.engine.Calls("InspectContainer"), env.engine.Calls("ContainerStats")
	for range 3 {
		stats()
	}
	assert.Check(t, is.Equal(env.engine.Calls("InspectContainer"), inspects), "the pid is remembered")
	assert.Check(t, is.Equal(env.engine.Calls("ContainerStats"), engineStats), "no engine stats call")

	// Restarted: a new process; the old pid is no longer in the container's cgroup.
	assert.NilError(t, stopContainer(env, cid, 0))
	env.startContainer(t, cid)
	newPid := env.inspect(t, cid).Pid
	host.write(t, "proc/"+strconv.Itoa(env.svc.mustPid(t, cid))+"/cgroup", "0::/system.slice/other.scope\n")
	host.addProcess(t, cid, newPid, 7000000)
	assert.Check(t, is.Equal(stats().GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(7_000_000_000)))

	// Not readable here: the engine answers.
	env.engine.SetStats(cid, rtSample(3, time.Unix(1700000000, 5)))
	assert.NilError(t, os.RemoveAll(filepath.Join(host.root, "sys/fs/cgroup/docker", cid)))
	assert.Check(t, is.Equal(stats().GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(3000)))

	// The engine on another host: its pid is no process here, or another one.
	for _, cgroupFile := range []string{"", "0::/system.slice/sshd.service\n"} {
		pid := env.inspect(t, cid).Pid
		assert.NilError(t, os.RemoveAll(filepath.Join(host.root, "proc", strconv.Itoa(pid))))
		if cgroupFile != "" {
			host.write(t, "proc/"+strconv.Itoa(pid)+"/cgroup", cgroupFile)
		}
		assert.Check(t, is.Equal(stats().GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(3000)), "not left out")
	}
}

// mustPid is the pid s remembers for container id.
func (s *Service) mustPid(t *testing.T, id string) int {
	t.Helper()
	p, ok := s.pids.get(id)
	assert.Assert(t, ok, "no pid remembered for %s", id)
	return p.pid
}

func TestContainerStatsWritableLayer(t *testing.T) {
	env := newRTEnv(t)
	host := newRTMetrics(t, env)
	layers := stats.NewLayers(host.root, 20*time.Millisecond, logctx.Discard())
	env.svc.deps.Layers = layers
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); layers.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	env.startContainer(t, cid)
	pid := env.inspect(t, cid).Pid
	host.addProcess(t, cid, pid, 1000)
	host.write(t, "proc/"+strconv.Itoa(pid)+"/mountinfo",
		"900 800 0:90 / / rw - overlay overlay rw,lowerdir=/l,upperdir=/snapshots/7/fs,workdir=/snapshots/7/work\n")
	host.write(t, "snapshots/7/fs/var/log/app.log", string(make([]byte, 8192)))

	layer := func() *runtimeapi.FilesystemUsage {
		t.Helper()
		resp, err := env.svc.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: cid})
		assert.NilError(t, err)
		return resp.GetStats().GetWritableLayer()
	}
	assert.Check(t, layer() == nil, "not measured yet: the request does not walk the layer")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if l := layer(); l == nil {
			return poll.Continue("no writable layer yet")
		}
		return poll.Success()
	})
	l := layer()
	assert.Check(t, is.Equal(l.GetInodesUsed().GetValue(), uint64(4)), "fs, var, log, app.log")
	assert.Check(t, l.GetUsedBytes().GetValue() >= 8192)
	assert.Check(t, is.Equal(l.GetFsId().GetMountpoint(), env.dockerRoot), "the engine's data root, as ImageFsInfo")
	assert.Check(t, l.GetTimestamp() <= time.Now().UnixNano() && l.GetTimestamp() > 0, "when it was measured")
	assert.Check(t, is.Equal(env.engine.Calls("ContainerStats"), 0), "no engine stats call")
}
