package core

import (
	"context"
	"slices"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func removeContainer(env *rtEnv, cid string) error {
	_, err := env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	return err
}

func TestRemoveContainer(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	running := env.runContainer(t, sbID, sbCfg, "app")
	exited := env.exitedContainer(t, sbID, sbCfg, "job")

	for _, cid := range []string{running, exited} {
		assert.NilError(t, removeContainer(env, cid))
		assert.Check(t, !slices.Contains(env.engine.ContainerIDs(), cid))
		assert.Check(t, is.Contains(env.logs.Stopped(), cid))
		_, copying := env.logs.Started()[cid]
		assert.Check(t, !copying)
		// Again: success.
		assert.NilError(t, removeContainer(env, cid))
	}
	assert.DeepEqual(t, env.engine.ContainerIDs(), []string{sbID})

	_, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: running})
	assert.Check(t, cerrdefs.IsNotFound(err))
}

func TestRemoveContainerUnknownOrSandbox(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	assert.NilError(t, removeContainer(env, "0123456789abcdef"))
	// RemoveContainer does not remove sandboxes.
	assert.NilError(t, removeContainer(env, sbID))
	assert.DeepEqual(t, env.engine.ContainerIDs(), []string{sbID})
	assert.Check(t, cerrdefs.IsInvalidArgument(removeContainer(env, "")))
}

func TestRemoveContainerEngineError(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	env.engine.InjectError("RemoveContainer", cerrdefs.ErrUnavailable)
	assert.Check(t, cerrdefs.IsUnavailable(removeContainer(env, cid)))
	env.engine.InjectError("RemoveContainer", nil)
	assert.Check(t, slices.Contains(env.engine.ContainerIDs(), cid))
	assert.NilError(t, removeContainer(env, cid))
}
