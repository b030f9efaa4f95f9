package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
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

func TestResumeLogs(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	running := env.runContainer(t, sbID, sbCfg, "app")
	env.exitedContainer(t, sbID, sbCfg, "job")
	// Exited while we were down, and kubelet still has its log: its last lines are copied.
	logDir := t.TempDir()
	sbLogs := rtSandboxConfig("web")
	sbLogs.LogDirectory = logDir
	finished := env.exitedContainer(t, sbID, sbLogs, "finished")
	finishedLog := filepath.Join(logDir, "finished", "0.log")
	assert.NilError(t, os.MkdirAll(filepath.Dir(finishedLog), 0o750))
	assert.NilError(t, os.WriteFile(finishedLog, nil, 0o640))
	env.createContainer(t, sbID, sbCfg, rtContainerConfig("created"))
	cfg := rtContainerConfig("nolog")
	cfg.LogPath = ""
	nolog := env.createContainer(t, sbID, sbCfg, cfg)
	env.startContainer(t, nolog)

	// This process restarts: a new copier knows nothing but the records.
	env.logs = env.logs.restarted()
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

// TestResumeLogsTrustsRecordsNotLabels: after a restart, logs resume to the files
// recorded at creation; a container whose log path label was set by someone else
// (anyone with the engine's socket can) is not written to.
func TestResumeLogsTrustsRecordsNotLabels(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	ours := env.runContainer(t, sbID, sbCfg, "app")
	// Created outside the CRI with our labels (anyone with the engine's socket can).
	forgedLabels := map[string]string{labelContainerType: typeContainer, labelSandboxID: sbID, labelLogPath: "/etc/shadow"}
	forged, err := env.engine.CreateContainer(context.Background(), docker.ContainerSpec{
		Name: "k8s_forged_web_default_web-uid_0", Image: rtContainerImage, Labels: forgedLabels,
	})
	assert.NilError(t, err)
	assert.NilError(t, env.engine.StartContainer(context.Background(), forged))

	env.logs = env.logs.restarted()
	env.svc.deps.Logs = env.logs
	assert.NilError(t, env.svc.ResumeLogs(context.Background()))
	assert.DeepEqual(t, env.logs.Started(), map[string]string{ours: "/var/log/pods/default_web_web-uid/app/0.log"})

	// The first start of a version with records adopts the labels of containers an
	// earlier version created (kubelet's layout), once.
	env.logs = newRTFakeLogs()
	env.logs.adopt = true
	env.svc.deps.Logs = env.logs
	assert.NilError(t, env.svc.ResumeLogs(context.Background()))
	assert.DeepEqual(t, env.logs.Started(), map[string]string{ours: "/var/log/pods/default_web_web-uid/app/0.log"})
	f, ok := env.logs.Recorded(ours)
	assert.Check(t, ok)
	assert.Equal(t, f, logs.LogFile{Dir: "/var/log/pods/default_web_web-uid", Name: "app/0.log"})
	_, ok = env.logs.Recorded(forged) // "/etc/shadow" is not in kubelet's layout
	assert.Check(t, !ok)
}

func TestCreateContainerRecordsItsLogFile(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	f, ok := env.logs.Recorded(cid)
	assert.Check(t, ok)
	assert.Equal(t, f, logs.LogFile{Dir: "/var/log/pods/default_web_web-uid", Name: "app/0.log"})

	// A log path that leaves the pod's log directory is refused, and nothing is left.
	cfg := rtContainerConfig("escape")
	cfg.LogPath = "../../../etc/cron.d/x"
	_, err := env.svc.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sbID, Config: cfg, SandboxConfig: sbCfg,
	})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 2), "the sandbox and app only")

	_, err = env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
	_, ok = env.logs.Recorded(cid)
	assert.Check(t, !ok, "forgotten with its container")
}
