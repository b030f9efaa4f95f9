//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestEngineOutage stops dockerd under a running shim: calls give Unavailable, and
// they succeed again once the engine is back, without restarting the shim.
func TestEngineOutage(t *testing.T) {
	s := startShim(t)
	ctx := context.Background()
	importImage(t, "e2e/outage:1")
	_, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)

	_, err = hackOutput("engine.sh", "stop-dockerd")
	assert.NilError(t, err)
	restarted := false
	defer func() {
		if !restarted {
			_, _ = hackOutput("engine.sh", "start-dockerd")
		}
	}()
	// The image cache answers from its index until it sees the event stream end (within
	// milliseconds); from then on calls reach the engine and fail.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{}); status.Code(err) != codes.Unavailable {
			return poll.Continue("ListImages with the engine down: %v", err)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(50*time.Millisecond))
	calls := map[string]error{}
	_, calls["ListImages"] = s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	_, calls["ImageStatus"] = s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec("e2e/outage:1")})
	_, calls["PullImage"] = s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec("e2e/outage:1")})
	_, calls["RemoveImage"] = s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec("e2e/outage:1")})
	_, calls["ImageFsInfo"] = s.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	_, calls["Version"] = s.rt.Version(ctx, &runtimeapi.VersionRequest{})
	_, calls["RunPodSandbox"] = s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("outage")})
	_, calls["ListPodSandbox"] = s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	_, calls["PodSandboxStatus"] = s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "0123abcd"})
	_, calls["StopPodSandbox"] = s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "0123abcd"})
	_, calls["ListContainers"] = s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	_, calls["ContainerStatus"] = s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "0123abcd"})
	_, calls["RuntimeConfig"] = s.rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	for rpc, err := range calls {
		assert.Check(t, status.Code(err) == codes.Unavailable, "%s with the engine down: %v", rpc, err)
	}
	st, err := s.rt.Status(ctx, &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	assert.Check(t, !st.Status.Conditions[0].Status, "RuntimeReady must be false with the engine down")

	_, err = hackOutput("engine.sh", "start-dockerd")
	assert.NilError(t, err)
	restarted = true
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		if err != nil {
			return poll.Continue("ListImages after restart: %v", err)
		}
		if len(resp.Images) == 0 {
			return poll.Continue("no images yet")
		}
		return poll.Success()
	}, poll.WithTimeout(60*time.Second))
	st2, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec("e2e/outage:1")})
	assert.NilError(t, err)
	assert.Check(t, st2.Image != nil)
	_, err = s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err, "ListPodSandbox after the engine came back")
	_, err = s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "0123abcd"})
	assert.NilError(t, err, "StopPodSandbox of an unknown sandbox after the engine came back")
}

// TestStartBeforeEngine: our binary started while dockerd is down (a node booting)
// waits for it instead of exiting, and serves once it answers; what depends on the
// engine's /info (the image store, hence the containerd pin source) is decided then.
func TestStartBeforeEngine(t *testing.T) {
	_, err := hackOutput("engine.sh", "stop-dockerd")
	assert.NilError(t, err)
	started := make(chan error, 1)
	go func() {
		time.Sleep(3 * time.Second) // our binary is waiting by then
		_, err := hackOutput("engine.sh", "start-dockerd")
		started <- err
	}()
	s := startShim(t) // polls until it serves
	assert.NilError(t, <-started)
	assert.Check(t, strings.Contains(s.log(t), "docker engine does not answer yet; waiting for it"))
	_, err = s.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	st, err := s.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	want := `"enabled":false`
	if env.store == "containerd" {
		want = `"enabled":true`
	}
	assert.Check(t, strings.Contains(st.Info["pinning"], want), "the containerd pin source follows the store /info reports: %s", st.Info["pinning"])
}
