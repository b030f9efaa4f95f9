package core

import (
	"context"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func reopenLog(env *rtEnv, cid string) error {
	_, err := env.svc.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: cid})
	return err
}

func TestReopenContainerLog(t *testing.T) {
	env := newRTEnv(t)
	sbID, cid := runningContainer(t, env)
	assert.NilError(t, reopenLog(env, cid))
	assert.DeepEqual(t, env.logs.Reopened(), []string{cid})

	copyErr := errors.New("cannot open")
	env.logs.ReopenError(copyErr)
	assert.Check(t, errors.Is(reopenLog(env, cid), copyErr))
	env.logs.ReopenError(nil)

	assert.NilError(t, stopContainer(env, cid, 0))
	assert.Check(t, cerrdefs.IsFailedPrecondition(reopenLog(env, cid)))
	assert.Check(t, is.Len(env.logs.Reopened(), 2), "no reopen of a stopped container")

	for _, bad := range []string{"0123456789abcdef", sbID} {
		assert.Check(t, cerrdefs.IsNotFound(reopenLog(env, bad)), bad)
	}
}

func TestReopenContainerLogWithoutLog(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cfg := rtContainerConfig("nolog")
	cfg.LogPath = ""
	cid := env.createContainer(t, sbID, sbCfg, cfg)
	env.startContainer(t, cid)
	assert.Check(t, cerrdefs.IsFailedPrecondition(reopenLog(env, cid)))

	// Without a copier no container has a CRI log to reopen.
	env.svc.deps.Logs = nil
	other := env.runContainer(t, sbID, sbCfg, "app")
	assert.Check(t, cerrdefs.IsFailedPrecondition(reopenLog(env, other)))
}
