package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPodSandboxStats(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	app := env.runContainer(t, sbID, sbCfg, "app")
	side := env.runContainer(t, sbID, sbCfg, "side")
	created := env.createContainer(t, sbID, sbCfg, rtContainerConfig("created"))
	t0 := time.Unix(1700000000, 0)
	env.engine.SetStats(sbID, rtSample(1, t0))
	env.engine.SetStats(app, rtSample(10, t0.Add(time.Second)))
	env.engine.SetStats(side, rtSample(100, t0.Add(2*time.Second)))

	resp, err := env.svc.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	st := resp.Stats
	wantAttrs := &runtimeapi.PodSandboxAttributes{
		Id:          sbID,
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "web-uid", Attempt: 1},
		Labels:      map[string]string{labelPodName: "web", labelPodNamespace: "default", labelPodUID: "web-uid", labelContainerName: "POD"},
		Annotations: map[string]string{"kubernetes.io/config.source": "api"},
	}
	if diff := cmp.Diff(wantAttrs, st.Attributes, protocmp.Transform()); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	// Totals: pause + containers (1 + 10 + 100), at the newest sample's time.
	last := t0.Add(2 * time.Second).UnixNano()
	wantCPU := &runtimeapi.CpuUsage{Timestamp: last, UsageCoreNanoSeconds: u64(111000), UsageNanoCores: u64(0)} // a first sample
	if diff := cmp.Diff(wantCPU, st.Linux.Cpu, protocmp.Transform()); diff != "" {
		t.Errorf("cpu (-want +got):\n%s", diff)
	}
	wantMem := &runtimeapi.MemoryUsage{
		Timestamp: last, WorkingSetBytes: u64(8880), UsageBytes: u64(11100), RssBytes: u64(5550),
		PageFaults: u64(1110), MajorPageFaults: u64(111),
	}
	if diff := cmp.Diff(wantMem, st.Linux.Memory, protocmp.Transform()); diff != "" {
		t.Errorf("memory (-want +got):\n%s", diff)
	}
	assert.Equal(t, st.Linux.Process.GetProcessCount().GetValue(), uint64(111))

	byID := map[string]*runtimeapi.ContainerStats{}
	for _, c := range st.Linux.Containers {
		byID[c.Attributes.Id] = c
	}
	assert.Equal(t, len(byID), 3)
	assert.Equal(t, byID[app].GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(10000))
	assert.Equal(t, byID[side].GetMemory().GetUsageBytes().GetValue(), uint64(10000))
	assert.Check(t, byID[created].Cpu == nil)

	// Stopped: attributes only.
	assert.NilError(t, stopSandbox(env, sbID))
	resp, err = env.svc.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	if diff := cmp.Diff(&runtimeapi.PodSandboxStats{Attributes: wantAttrs, Linux: &runtimeapi.LinuxPodSandboxStats{}}, resp.Stats, protocmp.Transform()); diff != "" {
		t.Errorf("stopped (-want +got):\n%s", diff)
	}
}

func TestPodSandboxStatsHostNetworkHasNoNetwork(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtHostNetwork(rtSandboxConfig("web")))
	resp, err := env.svc.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	assert.Check(t, resp.Stats.Linux.Network == nil)
	assert.Check(t, resp.Stats.Linux.Cpu != nil)
}

func TestPodSandboxStatsErrors(t *testing.T) {
	env := newRTEnv(t)
	sbID, cid := runningContainer(t, env)
	for _, bad := range []string{"0123456789abcdef", cid} {
		_, err := env.svc.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: bad})
		assert.Check(t, cerrdefs.IsNotFound(err), "%s: %v", bad, err)
	}
	env.engine.InjectError("ContainerStats", cerrdefs.ErrUnavailable)
	_, err := env.svc.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sbID})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

func TestListPodSandboxStats(t *testing.T) {
	env := newRTEnv(t)
	webCfg := rtSandboxConfig("web")
	webCfg.Labels["tier"] = "front"
	web := env.runSandbox(t, webCfg)
	app := env.runContainer(t, web, webCfg, "app")
	dbCfg := rtSandboxConfig("db")
	db := env.runSandbox(t, dbCfg)
	env.engine.SetStats(web, rtSample(1, time.Now()))
	env.engine.SetStats(app, rtSample(2, time.Now()))
	env.engine.SetStats(db, rtSample(5, time.Now()))
	// A checkpoint-only sandbox has no stats.
	env.writeCheckpoint(t, "cafe0001", rtSandboxConfig("orphan"))

	list := func(f *runtimeapi.PodSandboxStatsFilter) map[string]*runtimeapi.PodSandboxStats {
		t.Helper()
		resp, err := env.svc.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{Filter: f})
		assert.NilError(t, err)
		out := map[string]*runtimeapi.PodSandboxStats{}
		for _, s := range resp.Stats {
			out[s.Attributes.Id] = s
		}
		return out
	}
	all := list(nil)
	assert.Equal(t, len(all), 2)
	assert.Equal(t, all[web].GetLinux().GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(3000))
	assert.Equal(t, all[db].GetLinux().GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(5000))
	assert.Check(t, is.Len(all[web].GetLinux().GetContainers(), 1))

	byID := list(&runtimeapi.PodSandboxStatsFilter{Id: db})
	assert.Equal(t, len(byID), 1)
	assert.Check(t, byID[db] != nil)
	byLabel := list(&runtimeapi.PodSandboxStatsFilter{LabelSelector: map[string]string{"tier": "front"}})
	assert.Equal(t, len(byLabel), 1)
	assert.Check(t, byLabel[web] != nil)
	assert.Check(t, is.Len(list(&runtimeapi.PodSandboxStatsFilter{Id: app}), 0))
}

func TestListPodSandboxStatsLeavesOutVanishedAndFailing(t *testing.T) {
	env := newRTEnv(t)
	ids := map[string]string{}
	var brokenApp string
	for _, name := range []string{"keep", "gone", "vanishing", "broken"} {
		cfg := rtSandboxConfig(name)
		ids[name] = env.runSandbox(t, cfg)
		env.engine.SetStats(ids[name], rtSample(1, time.Now()))
		app := env.createContainer(t, ids[name], cfg, rtContainerConfig("app"))
		env.startContainer(t, app)
		if name == "broken" {
			brokenApp = app
		}
	}
	// Removed between the list and its inspection; removed between its inspection
	// and its stats; one of its containers' stats fail.
	env.engine.RemoveBefore("InspectContainer", ids["gone"])
	env.engine.RemoveBefore("ContainerStats", ids["vanishing"])
	env.engine.InjectContainerError("ContainerStats", brokenApp, fmt.Errorf("injected: %w", cerrdefs.ErrInternal))

	ctx, hook := hookedCtx()
	resp, err := env.svc.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	assert.NilError(t, err)
	var got []string
	for _, s := range resp.Stats {
		got = append(got, s.Attributes.Id)
	}
	assert.DeepEqual(t, got, []string{ids["keep"]})
	assert.Check(t, is.Len(resp.Stats[0].GetLinux().GetContainers(), 1))
	for _, gone := range []string{ids["gone"], ids["vanishing"]} {
		assert.Check(t, logged(hook, logrus.DebugLevel, "sandbox", gone), "%v", hook.AllEntries())
	}
	assert.Check(t, logged(hook, logrus.WarnLevel, "sandbox", ids["broken"]), "%v", hook.AllEntries())

	// The single RPC still reports the failure.
	_, err = env.svc.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: ids["broken"]})
	assert.Check(t, cerrdefs.IsInternal(err), "got %v", err)
	// An engine that cannot be reached fails the list: no empty answer.
	env.engine.InjectContainerError("ContainerStats", brokenApp, fmt.Errorf("injected: %w", cerrdefs.ErrUnavailable))
	_, err = env.svc.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

// With the cgroups readable, ListPodSandboxStats costs two engine lists a request once
// the processes are known: no inspect, no engine stats, per pod or container.
func TestListPodSandboxStatsFromCgroups(t *testing.T) {
	env := newRTEnv(t)
	host := newRTMetrics(t, env)
	want := map[string]uint64{}
	for i, name := range []string{"a", "b", "c"} {
		cfg := rtSandboxConfig(name)
		sb := env.runSandbox(t, cfg)
		host.addProcess(t, sb, env.inspect(t, sb).Pid, 1000)
		app := env.createContainer(t, sb, cfg, rtContainerConfig("app"))
		env.startContainer(t, app)
		host.addProcess(t, app, env.inspect(t, app).Pid, uint64(1000*(i+1)))
		want[sb] = uint64(1000+1000*(i+1)) * 1000
	}
	list := func() map[string]*runtimeapi.PodSandboxStats {
		t.Helper()
		resp, err := env.svc.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{})
		assert.NilError(t, err)
		out := map[string]*runtimeapi.PodSandboxStats{}
		for _, s := range resp.Stats {
			out[s.Attributes.Id] = s
		}
		return out
	}
	list()
	lists, inspects := env.engine.Calls("ListContainers"), env.engine.Calls("InspectContainer")
	got := list()
	assert.Check(t, is.Equal(env.engine.Calls("ListContainers")-lists, 2), "one list of sandboxes, one of containers")
	assert.Check(t, is.Equal(env.engine.Calls("InspectContainer"), inspects), "pids remembered")
	assert.Check(t, is.Equal(env.engine.Calls("ContainerStats"), 0))
	assert.Check(t, is.Len(got, 3))
	for sb, cpu := range want {
		st := got[sb]
		assert.Check(t, is.Equal(st.GetLinux().GetCpu().GetUsageCoreNanoSeconds().GetValue(), cpu), sb)
		assert.Check(t, is.Len(st.GetLinux().GetContainers(), 1))
		assert.Check(t, is.Equal(st.GetLinux().GetNetwork().GetDefaultInterface().GetRxBytes().GetValue(), uint64(5000)), "eth0 of the pod's namespace")
	}
}
