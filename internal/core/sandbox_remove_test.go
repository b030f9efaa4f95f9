package core

import (
	"context"
	"fmt"
	"slices"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/network"
)

func removeSandbox(env *rtEnv, sbID string) error {
	_, err := env.svc.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sbID})
	return err
}

func TestRemovePodSandbox(t *testing.T) {
	env := newRTEnv(t)
	p := runTwoPods(t, env)
	sbID, running, created, otherID, otherC := p.sbID, p.running, p.created, p.otherID, p.otherC

	// Removed without being stopped first: everything goes.
	assert.NilError(t, removeSandbox(env, sbID))
	ids := env.engine.ContainerIDs()
	for _, gone := range []string{sbID, running, created} {
		assert.Check(t, !slices.Contains(ids, gone), "container %s left", gone)
	}
	assert.Check(t, slices.Contains(ids, otherID))
	assert.Check(t, slices.Contains(ids, otherC))
	_, ok := env.checkpointFile(t, sbID)
	assert.Check(t, !ok, "checkpoint left")
	_, ok = env.checkpointFile(t, otherID)
	assert.Check(t, ok)
	assert.Check(t, !env.net.Attached(sbID))
	assert.Check(t, env.net.Attached(otherID))
	assert.Check(t, is.Contains(env.logs.Stopped(), running))
	assert.Check(t, is.Contains(env.logs.Stopped(), created))
	_, copying := env.logs.Started()[running]
	assert.Check(t, !copying)
	assert.Check(t, is.Contains(env.logs.Started(), otherC))

	// Again: success.
	assert.NilError(t, removeSandbox(env, sbID))
	_, err := env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	assert.Check(t, cerrdefs.IsNotFound(err))
}

func TestRemovePodSandboxStopped(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	env.runContainer(t, sbID, cfg, "app")
	assert.NilError(t, stopSandbox(env, sbID))
	assert.NilError(t, removeSandbox(env, sbID))
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
	for _, td := range env.net.TearDowns()[1:] {
		assert.Equal(t, td.NetNS, "", "a stopped sandbox has no namespace to name")
	}
}

func TestRemovePodSandboxSkipsTearDownDoneByStop(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	env.runContainer(t, sbID, cfg, "app")
	env.runContainer(t, sbID, cfg, "sidecar")
	assert.NilError(t, stopSandbox(env, sbID))
	// Known stopped and torn down: removed without an inspect.
	env.engine.InjectError("InspectContainer", fmt.Errorf("engine busy: %w", cerrdefs.ErrUnavailable))
	assert.NilError(t, removeSandbox(env, sbID))
	env.engine.InjectError("InspectContainer", nil)
	assert.Check(t, is.Len(env.net.TearDowns(), 1), "the stop's teardown released everything")
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
	_, ok := env.checkpointFile(t, sbID)
	assert.Check(t, !ok, "checkpoint left")

	// An attachment recorded again after the stop (another binary, say) is torn down.
	sbID, _ = env.webSandbox(t)
	assert.NilError(t, stopSandbox(env, sbID))
	_, err := env.net.SetUp(context.Background(), podNetwork(sbID, netnsPath(1), cfg.GetMetadata(), nil))
	assert.NilError(t, err)
	assert.NilError(t, removeSandbox(env, sbID))
	tds := env.net.TearDowns()
	assert.Check(t, is.Len(tds, 3))
	assert.Check(t, !env.net.Attached(sbID))

	// A sandbox whose pause container stopped on its own was not torn down: Remove does it.
	sbID, _ = env.webSandbox(t)
	assert.NilError(t, env.engine.StopContainer(context.Background(), sbID, 0))
	assert.NilError(t, removeSandbox(env, sbID))
	assert.Check(t, is.Len(env.net.TearDowns(), 4))
	assert.Check(t, !env.net.Attached(sbID))
}

func TestRemovePodSandboxUnknown(t *testing.T) {
	env := newRTEnv(t)
	for _, sbID := range []string{"0123456789abcdef", "no/such/id", ".hidden"} {
		assert.NilError(t, removeSandbox(env, sbID), sbID)
	}
	assert.Check(t, is.Len(env.net.TearDowns(), 0))
}

func TestRemovePodSandboxCheckpointOnly(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	cfg.PortMappings = rtPorts()
	sbID := env.runSandbox(t, cfg)
	assert.NilError(t, env.engine.RemoveContainer(context.Background(), sbID))

	assert.NilError(t, removeSandbox(env, sbID))
	_, ok := env.checkpointFile(t, sbID)
	assert.Check(t, !ok, "checkpoint left")
	assert.DeepEqual(t, env.net.TearDowns(), []network.PodNetwork{{
		Namespace: "default", Name: "web", SandboxID: sbID, PortMappings: rtNetPorts(),
	}})
	list, err := env.svc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	assert.Check(t, is.Len(list.Items, 0))
}

func TestRemovePodSandboxNotASandbox(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, cfg, rtContainerConfig("app"))
	assert.NilError(t, removeSandbox(env, cid))
	assert.Check(t, slices.Contains(env.engine.ContainerIDs(), cid), "a container id does not remove the container")
	_, ok := env.checkpointFile(t, sbID)
	assert.Check(t, ok)
}

func TestRemovePodSandboxEngineErrors(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	env.createContainer(t, sbID, cfg, rtContainerConfig("app"))
	for _, method := range []string{"InspectContainer", "ListContainers", "RemoveContainer"} {
		env.engine.InjectError(method, cerrdefs.ErrUnavailable)
		err := removeSandbox(env, sbID)
		assert.Check(t, cerrdefs.IsUnavailable(err), "%s: got %v", method, err)
		env.engine.InjectError(method, nil)
		_, ok := env.checkpointFile(t, sbID)
		assert.Check(t, ok, "%s: checkpoint removed although the sandbox was not", method)
	}
	assert.NilError(t, removeSandbox(env, sbID))
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
}

// A stopped sandbox's containers, pause container and checkpoint are removed at once:
// a container whose removal fails is removed by the retry, also by a restarted process
// (which knows nothing of the stop, and finds the sandbox gone).
func TestRemovePodSandboxAtOnceRetry(t *testing.T) {
	for _, tc := range []struct {
		fault   string
		restart bool
	}{{"RemoveContainer", false}, {"RemoveContainer", true}, {"ListContainers", false}} {
		fault := tc.fault
		t.Run(fmt.Sprintf("%s restart=%v", fault, tc.restart), func(t *testing.T) {
			env := newRTEnv(t)
			sbID, cfg := env.webSandbox(t)
			app := env.runContainer(t, sbID, cfg, "app")
			assert.NilError(t, stopSandbox(env, sbID))
			if fault == "RemoveContainer" {
				env.engine.InjectContainerError(fault, app, fmt.Errorf("device busy: %w", cerrdefs.ErrUnavailable))
			} else {
				env.engine.InjectError(fault, fmt.Errorf("engine busy: %w", cerrdefs.ErrUnavailable))
			}
			err := removeSandbox(env, sbID)
			assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
			assert.Check(t, slices.Contains(env.engine.ContainerIDs(), app), "the container whose removal failed is left")
			env.engine.InjectContainerError(fault, app, nil)
			env.engine.InjectError(fault, nil)
			if tc.restart {
				assert.Check(t, !slices.Contains(env.engine.ContainerIDs(), sbID), "the pause container went at once")
				env.svc = New(env.svc.cfg, env.svc.deps)
			}

			assert.NilError(t, removeSandbox(env, sbID))
			assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
			_, ok := env.checkpointFile(t, sbID)
			assert.Check(t, !ok, "checkpoint left")
			assert.Check(t, is.Len(env.net.TearDowns(), 1), "torn down once, by the stop")
		})
	}
}
