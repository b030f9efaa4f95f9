package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func containerStatus(t *testing.T, env *rtEnv, cid string, verbose bool) *runtimeapi.ContainerStatusResponse {
	t.Helper()
	resp, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: cid, Verbose: verbose})
	assert.NilError(t, err)
	return resp
}

func TestContainerStatus(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cfg := rtContainerConfig("app")
	cfg.Metadata.Attempt = 3
	cfg.Annotations = map[string]string{"note": "n"}
	cfg.Mounts = []*runtimeapi.Mount{
		{HostPath: "/data", ContainerPath: "/data", Readonly: true},
		{HostPath: "/h2c", ContainerPath: "/h2c", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{HostPath: "/bidi", ContainerPath: "/bidi", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 256, MemoryLimitInBytes: 1 << 30}}
	cid := env.createContainer(t, sbID, sbCfg, cfg)

	d := env.inspect(t, cid)
	want := &runtimeapi.ContainerStatus{
		Id:          cid,
		Metadata:    &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
		State:       runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt:   d.Created.UnixNano(),
		Image:       &runtimeapi.ImageSpec{Image: rtContainerImage},
		ImageRef:    "docker://" + d.ImageID, // upstream's form for an image without a repo digest
		ImageId:     d.ImageID,
		Labels:      map[string]string{labelContainerName: "app"},
		Annotations: map[string]string{"note": "n"},
		LogPath:     "/var/log/pods/default_web_web-uid/app/0.log",
		Mounts: []*runtimeapi.Mount{
			{HostPath: "/data", ContainerPath: "/data", Readonly: true},
			{HostPath: "/h2c", ContainerPath: "/h2c", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
			{HostPath: "/bidi", ContainerPath: "/bidi", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
		},
		Resources: &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
			CpuShares: 256, MemoryLimitInBytes: 1 << 30, MemorySwapLimitInBytes: 1 << 30,
		}},
	}
	check := func(want *runtimeapi.ContainerStatus) {
		t.Helper()
		got := containerStatus(t, env, cid, false).Status
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
	}
	check(want)

	env.startContainer(t, cid)
	d = env.inspect(t, cid)
	want.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	want.StartedAt = d.StartedAt.UnixNano()
	check(want)

	for _, tc := range []struct {
		state    string
		code     int
		reason   string
		criState runtimeapi.ContainerState
	}{
		{state: docker.StateExited, code: 0, reason: "Completed", criState: runtimeapi.ContainerState_CONTAINER_EXITED},
		{state: docker.StateExited, code: 137, reason: "Error", criState: runtimeapi.ContainerState_CONTAINER_EXITED},
		{state: docker.StateDead, code: 1, reason: "Error", criState: runtimeapi.ContainerState_CONTAINER_EXITED},
		{state: docker.StatePaused, criState: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{state: docker.StateRestarting, criState: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{state: docker.StateRemoving, criState: runtimeapi.ContainerState_CONTAINER_UNKNOWN},
	} {
		t.Run(tc.state+"/"+tc.reason, func(t *testing.T) {
			env.engine.SetContainerState(cid, docker.StateRunning, 0)
			env.engine.SetContainerState(cid, tc.state, tc.code)
			got := containerStatus(t, env, cid, false).Status
			d := env.inspect(t, cid)
			assert.Equal(t, got.State, tc.criState)
			assert.Equal(t, got.ExitCode, int32(tc.code))
			assert.Equal(t, got.Reason, tc.reason)
			assert.Equal(t, got.StartedAt, d.StartedAt.UnixNano())
			if tc.criState == runtimeapi.ContainerState_CONTAINER_EXITED {
				assert.Equal(t, got.FinishedAt, d.FinishedAt.UnixNano())
				assert.Check(t, got.FinishedAt >= got.StartedAt)
			}
		})
	}
}

// A container the engine could not start stays "created" with an exit code; it is
// reported EXITED with ContainerCannotRun (as upstream), or kubelet would start it again
// forever whatever the pod's restart policy.
func TestContainerStatusCannotRun(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	env.engine.SetContainerState(cid, docker.StateCreated, 127)
	got := containerStatus(t, env, cid, false).Status
	assert.Equal(t, got.State, runtimeapi.ContainerState_CONTAINER_EXITED)
	assert.Equal(t, got.Reason, "ContainerCannotRun")
	assert.Equal(t, got.ExitCode, int32(127))
	assert.Equal(t, got.StartedAt, got.CreatedAt)
	assert.Equal(t, got.FinishedAt, got.CreatedAt)
}

// Containers kubelet creates from an image ID are reported with the image's first tag
// and a pullable reference, as upstream reports them.
func TestContainerStatusImage(t *testing.T) {
	env := newRTEnv(t)
	img := docker.Image{
		ID: "sha256:" + strings.Repeat("ab", 32), RepoTags: []string{"app:1", "app:latest"},
		RepoDigests: []string{"registry.test/app@sha256:" + strings.Repeat("cd", 32)},
	}
	env.engine.AddImage(img)
	sbID, sbCfg := env.webSandbox(t)
	cfg := rtContainerConfig("app")
	cfg.Image = &runtimeapi.ImageSpec{Image: img.ID}
	cid := env.createContainer(t, sbID, sbCfg, cfg)
	got := containerStatus(t, env, cid, false).Status
	assert.Equal(t, got.Image.Image, "app:1")
	assert.Equal(t, got.ImageRef, "docker-pullable://"+img.RepoDigests[0])
	assert.Equal(t, got.ImageId, img.ID)
}

func TestContainerStatusVerbose(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	resp := containerStatus(t, env, cid, true)
	var info map[string]any
	assert.NilError(t, json.Unmarshal([]byte(resp.Info["info"]), &info))
	d := env.inspect(t, cid)
	assert.Equal(t, info["pid"], float64(d.Pid))
	assert.Equal(t, info["sandboxID"], sbID)
	assert.Equal(t, info["engineLogPath"], d.LogPath)
	assert.Check(t, containerStatus(t, env, cid, false).Info == nil)
}

func TestContainerStatusNotFound(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	for _, bad := range []string{"0123456789abcdef", sbID} {
		_, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: bad})
		assert.Check(t, cerrdefs.IsNotFound(err), "%s: got %v", bad, err)
	}
	_, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
}

// The status of an exited container waits for its output to reach the CRI log, so
// that kubelet reading the log next finds all of it.
func TestContainerStatusDrainsLogOfExited(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	containerStatus(t, env, cid, false)
	assert.Check(t, len(env.logs.Waited()) == 0, "no wait for a running container")

	env.engine.SetContainerState(cid, docker.StateExited, 0)
	st := containerStatus(t, env, cid, false).Status
	assert.Equal(t, st.State, runtimeapi.ContainerState_CONTAINER_EXITED)
	assert.DeepEqual(t, env.logs.Waited(), []string{cid})

	// Without a log path there is nothing to wait for.
	cfg := rtContainerConfig("nolog")
	cfg.LogPath = ""
	nolog := env.createContainer(t, sbID, sbCfg, cfg)
	env.startContainer(t, nolog)
	env.engine.SetContainerState(nolog, docker.StateExited, 1)
	assert.Equal(t, containerStatus(t, env, nolog, false).Status.Reason, "Error")
	assert.DeepEqual(t, env.logs.Waited(), []string{cid})
}
