package core

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestResumeLogs(t *testing.T) {
	env := newRTEnv(t)
	sbCfg := rtSandboxConfig("web")
	sbID := env.runSandbox(t, sbCfg)
	running := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	env.startContainer(t, running)
	exited := env.createContainer(t, sbID, sbCfg, rtContainerConfig("job"))
	env.startContainer(t, exited)
	assert.NilError(t, stopContainer(env, exited, 0))
	// Exited while we were down, and kubelet still has its log: its last lines are copied.
	logDir := t.TempDir()
	sbLogs := rtSandboxConfig("web")
	sbLogs.LogDirectory = logDir
	finished := env.createContainer(t, sbID, sbLogs, rtContainerConfig("finished"))
	env.startContainer(t, finished)
	assert.NilError(t, stopContainer(env, finished, 0))
	finishedLog := filepath.Join(logDir, "finished", "0.log")
	assert.NilError(t, os.MkdirAll(filepath.Dir(finishedLog), 0o750))
	assert.NilError(t, os.WriteFile(finishedLog, nil, 0o640))
	env.createContainer(t, sbID, sbCfg, rtContainerConfig("created"))
	cfg := rtContainerConfig("nolog")
	cfg.LogPath = ""
	nolog := env.createContainer(t, sbID, sbCfg, cfg)
	env.startContainer(t, nolog)

	// This process restarts: a new copier knows nothing.
	env.logs = newRTFakeLogs()
	env.svc.deps.Logs = env.logs
	assert.NilError(t, env.svc.ResumeLogs(context.Background()))
	assert.DeepEqual(t, env.logs.Started(), map[string]string{
		running:  "/var/log/pods/default_web_web-uid/app/0.log",
		finished: finishedLog,
	})

	// A copier that fails for one container does not fail the rest.
	env.logs.StartError(cerrdefs.ErrUnavailable)
	assert.NilError(t, env.svc.ResumeLogs(context.Background()))

	env.engine.InjectError("ListContainers", cerrdefs.ErrUnavailable)
	assert.Check(t, cerrdefs.IsUnavailable(env.svc.ResumeLogs(context.Background())))

	env.svc.deps.Logs = nil
	assert.NilError(t, env.svc.ResumeLogs(context.Background()))
}

func TestResumeLogsSkipsSandboxes(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	assert.NilError(t, env.svc.ResumeLogs(context.Background()))
	_, ok := env.logs.Started()[sbID]
	assert.Check(t, !ok)
	_, err := env.svc.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	assert.NilError(t, err)
}
