package core

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/network"
)

// twoPods are the sandbox "web" (with rtPorts) holding a running container "app"
// and a created one "init", and the sandbox "other" with a running "app".
type twoPods struct{ sbID, running, created, otherID, otherC string }

func runTwoPods(t *testing.T, env *rtEnv) twoPods {
	t.Helper()
	cfg := rtSandboxConfig("web")
	cfg.PortMappings = rtPorts()
	p := twoPods{sbID: env.runSandbox(t, cfg)}
	p.running = env.runContainer(t, p.sbID, cfg, "app")
	p.created = env.createContainer(t, p.sbID, cfg, rtContainerConfig("init"))
	otherCfg := rtSandboxConfig("other")
	p.otherID = env.runSandbox(t, otherCfg)
	p.otherC = env.runContainer(t, p.otherID, otherCfg, "app")
	return p
}

func stopSandbox(env *rtEnv, sbID string) error {
	_, err := env.svc.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID})
	return err
}

func TestStopPodSandbox(t *testing.T) {
	env := newRTEnv(t)
	p := runTwoPods(t, env)
	sbID, running, created, otherID, otherC := p.sbID, p.running, p.created, p.otherID, p.otherC
	// The pause process: this test's, whose network namespace exists.
	env.engine.SetPid(sbID, os.Getpid())

	assert.NilError(t, stopSandbox(env, sbID))
	assert.Equal(t, env.inspect(t, running).State, docker.StateExited)
	assert.Equal(t, env.inspect(t, created).State, docker.StateCreated)
	assert.Equal(t, env.inspect(t, sbID).State, docker.StateExited)
	assert.Equal(t, env.inspect(t, otherC).State, docker.StateRunning) // another sandbox's container stays up
	assert.Equal(t, env.inspect(t, otherID).State, docker.StateRunning)
	assert.Check(t, !env.net.Attached(sbID))
	assert.Check(t, env.net.Attached(otherID))
	tds := env.net.TearDowns()
	assert.Assert(t, is.Len(tds, 1))
	// The namespace was held open for the teardown (the pause container stopped
	// meanwhile), and is released since.
	held := tds[0].NetNS
	assert.Check(t, strings.HasPrefix(held, fmt.Sprintf("/proc/%d/fd/", os.Getpid())), held)
	assert.Check(t, !holds(t, held), "still held")
	tds[0].NetNS = ""
	assert.DeepEqual(t, tds, []network.PodNetwork{{
		Namespace: "default", Name: "web", UID: "web-uid", SandboxID: sbID, PortMappings: rtNetPorts(),
	}})
	_, ok := env.checkpointFile(t, sbID)
	assert.Check(t, ok, "stop keeps the checkpoint")

	st, err := env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	assert.Equal(t, st.Status.State, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)

	// Again: success, and the network this process tore down is not torn down again.
	assert.NilError(t, stopSandbox(env, sbID))
	assert.Check(t, is.Len(env.net.TearDowns(), 1))

	// A restarted shim does not know that: it tears down again, without a namespace.
	restarted := New(env.svc.cfg, env.svc.deps)
	_, err = restarted.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	tds = env.net.TearDowns()
	assert.Assert(t, is.Len(tds, 2))
	assert.Equal(t, tds[1].NetNS, "")
	assert.Equal(t, tds[1].SandboxID, sbID)
}

func TestStopPodSandboxTearDownFails(t *testing.T) {
	env := newRTEnv(t)
	p := runTwoPods(t, env)
	second := env.runContainer(t, p.sbID, rtSandboxConfig("web"), "sidecar")
	env.net.TearDownError(fmt.Errorf("plugin failed: %w", cerrdefs.ErrUnavailable))

	err := stopSandbox(env, p.sbID)
	assert.Check(t, cerrdefs.IsUnavailable(err), "%v", err)
	for _, c := range []string{p.running, second, p.sbID} {
		assert.Check(t, is.Equal(env.inspect(t, c).State, docker.StateExited), "container %s still runs", c)
	}
	assert.Check(t, env.net.Attached(p.sbID), "nothing released")

	// kubelet's retry tears down what is left, without the namespace (gone with the
	// pause process): the plugins release what they hold on the host.
	env.net.TearDownError(nil)
	assert.NilError(t, stopSandbox(env, p.sbID))
	tds := env.net.TearDowns()
	assert.Check(t, is.Equal(tds[len(tds)-1].NetNS, ""))
	assert.Check(t, !env.net.Attached(p.sbID))
	assert.Check(t, is.Equal(env.inspect(t, p.otherID).State, docker.StateRunning))
}

func TestStopPodSandboxUnknown(t *testing.T) {
	env := newRTEnv(t)
	for _, sbID := range []string{"0123456789abcdef", "no/such/id", ".hidden"} {
		assert.NilError(t, stopSandbox(env, sbID), sbID)
	}
	assert.Check(t, is.Len(env.net.TearDowns(), 0))
	assert.Check(t, cerrdefs.IsInvalidArgument(stopSandbox(env, "")))
}

func TestStopPodSandboxNotASandbox(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, cfg, "app")
	assert.NilError(t, stopSandbox(env, cid))
	assert.Equal(t, env.inspect(t, cid).State, docker.StateRunning, "a container id does not stop the container")
}

func TestStopPodSandboxCheckpointOnly(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	cfg.PortMappings = rtPorts()
	sbID := env.runSandbox(t, cfg)
	// The engine loses the container behind our back.
	assert.NilError(t, env.engine.RemoveContainer(context.Background(), sbID))

	assert.NilError(t, stopSandbox(env, sbID))
	assert.DeepEqual(t, env.net.TearDowns(), []network.PodNetwork{{
		Namespace: "default", Name: "web", SandboxID: sbID, PortMappings: rtNetPorts(),
	}})
	assert.Check(t, !env.net.Attached(sbID))
	_, ok := env.checkpointFile(t, sbID)
	assert.Check(t, ok, "stop keeps the checkpoint for RemovePodSandbox")
}

func TestStopPodSandboxCheckpointOnlyHostNetwork(t *testing.T) {
	env := newRTEnv(t)
	env.writeCheckpoint(t, "4242424242", rtHostNetwork(rtSandboxConfig("web")))
	assert.NilError(t, stopSandbox(env, "4242424242"))
	assert.Check(t, is.Len(env.net.TearDowns(), 0))
}

func TestStopPodSandboxHostNetwork(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtHostNetwork(rtSandboxConfig("web"))
	sbID := env.runSandbox(t, cfg)
	cid := env.runContainer(t, sbID, cfg, "app")
	assert.NilError(t, stopSandbox(env, sbID))
	assert.Check(t, is.Len(env.net.TearDowns(), 0))
	assert.Equal(t, env.inspect(t, sbID).State, docker.StateExited)
	assert.Equal(t, env.inspect(t, cid).State, docker.StateExited)
}

func TestStopPodSandboxWithoutNetwork(t *testing.T) {
	env := newRTEnv(t, rtWithoutNetwork())
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	assert.NilError(t, stopSandbox(env, sbID))
	assert.Equal(t, env.inspect(t, sbID).State, docker.StateExited)
	assert.NilError(t, env.engine.RemoveContainer(context.Background(), sbID))
	assert.NilError(t, stopSandbox(env, sbID))
}

func TestStopPodSandboxEngineErrors(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	env.runContainer(t, sbID, cfg, "app")

	for _, method := range []string{"InspectContainer", "ListContainers", "StopContainer"} {
		env.engine.InjectError(method, fmt.Errorf("boom: %w", cerrdefs.ErrUnavailable))
		err := stopSandbox(env, sbID)
		assert.Check(t, cerrdefs.IsUnavailable(err), "%s: got %v", method, err)
		env.engine.InjectError(method, nil)
	}
	assert.NilError(t, stopSandbox(env, sbID))
	assert.Equal(t, env.inspect(t, sbID).State, docker.StateExited)
}
