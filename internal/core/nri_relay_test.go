package core

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func listedSandboxes(t *testing.T, env *rtEnv) []string {
	t.Helper()
	resp, err := env.svc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	var ids []string
	for _, p := range resp.Items {
		ids = append(ids, p.Id)
	}
	return ids
}

func listedContainers(t *testing.T, env *rtEnv) []string {
	t.Helper()
	resp, err := env.svc.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	assert.NilError(t, err)
	var ids []string
	for _, c := range resp.Containers {
		ids = append(ids, c.Id)
	}
	return ids
}

// While the plugins handle RunPodSandbox the sandbox is neither listed nor found, and
// no container can be created in it; afterwards it is.
func TestNRIRunPodSandboxHiddenUntilPluginsReturn(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	cfg := rtSandboxConfig("web")
	var seen bool
	plugins.During("RunPodSandbox", func(id string) {
		seen = true
		assert.Check(t, !slices.Contains(listedSandboxes(t, env), id))
		_, err := env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
		_, err = env.svc.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
			PodSandboxId: id, Config: rtContainerConfig("app"), SandboxConfig: cfg,
		})
		assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
		assert.Check(t, env.net.Attached(id), "the network is up before the plugins are called")
	})
	id := env.runSandbox(t, cfg)
	assert.Assert(t, seen)
	assert.Check(t, slices.Contains(listedSandboxes(t, env), id))
	assert.DeepEqual(t, plugins.Events(), []string{"RunPodSandbox " + id})
}

// A failing RunPodSandbox plugin fails the RPC, leaves nothing behind, tells the
// plugins, and a retry succeeds.
func TestNRIRunPodSandboxErrorCleansUp(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	plugins.FailOnce("RunPodSandbox", errors.New("induced"))
	cfg := rtSandboxConfig("web")
	_, err := env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "induced"))
	ev := plugins.Events()
	assert.Assert(t, is.Len(ev, 2))
	failed := strings.TrimPrefix(ev[0], "RunPodSandbox ")
	assert.Check(t, is.Equal(ev[1], "RemovePodSandbox "+failed))
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
	assert.Check(t, !env.net.Attached(failed))
	ids, err := env.checkpoints.List()
	assert.NilError(t, err)
	assert.Check(t, is.Len(ids, 0))

	id := env.runSandbox(t, cfg)
	assert.Check(t, is.DeepEqual(listedSandboxes(t, env), []string{id}))
}

// The container lifecycle reaches the plugins in the NRI order.
func TestNRIContainerLifecycleOrder(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	assert.NilError(t, stopContainer(env, cid, 0))
	assert.NilError(t, stopContainer(env, cid, 0)) // a second stop is not relayed again
	_, err := env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.DeepEqual(t, plugins.Events(), []string{
		"RunPodSandbox " + sbID, "CreateContainer " + cid, "PostCreateContainer " + cid,
		"StartContainer " + cid, "PostStartContainer " + cid, "StopContainer " + cid, "RemoveContainer " + cid,
	})
}

// While the plugins handle CreateContainer the container is neither listed nor found.
func TestNRICreateContainerHiddenUntilPluginsReturn(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	var seen bool
	plugins.During("CreateContainer", func(id string) {
		seen = true
		assert.Check(t, !slices.Contains(listedContainers(t, env), id))
		_, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
		assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
	})
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	assert.Assert(t, seen)
	assert.Check(t, is.DeepEqual(listedContainers(t, env), []string{cid}))
}

// A failing CreateContainer plugin fails the RPC, leaves no container, tells the
// plugins, and a retry succeeds.
func TestNRICreateContainerErrorCleansUp(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	plugins.FailOnce("CreateContainer", errors.New("induced"))
	_, err := env.svc.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sbID, Config: rtContainerConfig("app"), SandboxConfig: sbCfg,
	})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.DeepEqual(env.engine.ContainerIDs(), []string{sbID}))
	ev := plugins.Events()
	assert.Assert(t, is.Len(ev, 3))
	failed := strings.TrimPrefix(ev[1], "CreateContainer ")
	assert.Check(t, is.Equal(ev[2], "RemoveContainer "+failed))

	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	assert.Check(t, is.DeepEqual(listedContainers(t, env), []string{cid}))
}

// StopPodSandbox stops the containers before the plugins hear of it, while the
// sandbox still runs; a second stop is not relayed; no container is created in it.
func TestNRIStopPodSandboxOrder(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	var seen bool
	plugins.During("StopPodSandbox", func(string) {
		seen = true
		c, err := env.engine.InspectContainer(context.Background(), cid)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(c.State, docker.StateExited))
		sb, err := env.engine.InspectContainer(context.Background(), sbID)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(sb.State, docker.StateRunning))
	})
	for range 2 {
		_, err := env.svc.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID})
		assert.NilError(t, err)
	}
	assert.Assert(t, seen)
	_, err := env.svc.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sbID, Config: rtContainerConfig("late"), SandboxConfig: sbCfg,
	})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	_, err = env.svc.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	assert.DeepEqual(t, plugins.Events()[5:], []string{
		"StopContainer " + cid, "StopPodSandbox " + sbID, "RemoveContainer " + cid, "RemovePodSandbox " + sbID,
	})
}

// A container that exits on its own is relayed as stopped, once.
func TestNRIExitRelayed(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { env.svc.WatchNRIExits(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for env.engine.Calls("ContainerExits") == 0 { // the watcher subscribes asynchronously
		runtime.Gosched()
	}
	env.engine.SetContainerState(cid, docker.StateExited, 1)
	plugins.waitFor(t, "StopContainer", cid)
	_, err := env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
	n := 0
	for _, e := range plugins.Events() {
		if e == "StopContainer "+cid {
			n++
		}
	}
	assert.Check(t, is.Equal(n, 1))
}

// A container whose exit was relayed and that is then removed outside the CRI (docker
// rm) never reaches RemoveContainer: the sweep forgets its relayed stop, and keeps the
// stops of containers still there.
func TestNRISweepForgetsContainersRemovedOutsideTheCRI(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	gone := env.runContainer(t, sbID, sbCfg, "gone")
	kept := env.runContainer(t, sbID, sbCfg, "kept")
	ctx := context.Background()
	for _, id := range []string{gone, kept} {
		env.engine.SetContainerState(id, docker.StateExited, 0)
		env.svc.relayExit(ctx, id)
	}
	relayed := func() []string {
		env.svc.nriState.mu.Lock()
		defer env.svc.nriState.mu.Unlock()
		var keys []string
		for k := range env.svc.nriState.relayed {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	assert.DeepEqual(t, relayed(), sortedStrings(stopKey(gone), stopKey(kept)))
	assert.NilError(t, env.engine.RemoveContainer(ctx, gone)) // behind the CRI's back
	env.svc.sweepRelayed(ctx)
	assert.DeepEqual(t, relayed(), []string{stopKey(kept)})
}

func sortedStrings(s ...string) []string {
	sort.Strings(s)
	return s
}
