package core

import (
	"context"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
)

func TestStartContainer(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	assert.Equal(t, env.inspect(t, cid).State, docker.StateRunning)
	assert.DeepEqual(t, env.logs.Started(), map[string]string{cid: "/var/log/pods/default_web_web-uid/app/0.log"})

	// Without a log path nothing is copied.
	cfg := rtContainerConfig("nolog")
	cfg.LogPath = ""
	nolog := env.createContainer(t, sbID, sbCfg, cfg)
	env.startContainer(t, nolog)
	assert.Equal(t, env.inspect(t, nolog).State, docker.StateRunning)
	_, copying := env.logs.Started()[nolog]
	assert.Check(t, !copying)
}

func TestStartContainerWithoutLogCopier(t *testing.T) {
	env := newRTEnv(t)
	env.svc.deps.Logs = nil
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	assert.Equal(t, env.inspect(t, cid).State, docker.StateRunning)
}

func TestStartContainerErrors(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	ctx := context.Background()

	for _, bad := range []string{"0123456789abcdef", sbID} {
		_, err := env.svc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: bad})
		assert.Check(t, cerrdefs.IsNotFound(err), "%s: got %v", bad, err)
	}
	_, err := env.svc.StartContainer(ctx, &runtimeapi.StartContainerRequest{})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)

	env.engine.InjectError("StartContainer", cerrdefs.ErrUnavailable)
	_, err = env.svc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cid})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	env.engine.InjectError("StartContainer", nil)
	assert.Equal(t, len(env.logs.Started()), 0)

	copyErr := errors.New("disk full")
	env.logs.StartError(copyErr)
	_, err = env.svc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cid})
	assert.Check(t, errors.Is(err, copyErr), "got %v", err)
}
