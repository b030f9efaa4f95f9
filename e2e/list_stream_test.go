//go:build e2e

package e2e

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"sort"
	"testing"

	"google.golang.org/grpc"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// drain reads a server stream to its end and returns the ids of the items of every
// message (each message must carry at least one).
func drain[M any, I any](t *testing.T, stream grpc.ServerStreamingClient[M], items func(*M) []I, id func(I) string) []string {
	t.Helper()
	var ids []string
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			sort.Strings(ids)
			return ids
		}
		assert.NilError(t, err)
		assert.Check(t, len(items(m)) > 0, "a message without items")
		for _, it := range items(m) {
			ids = append(ids, id(it))
		}
	}
}

func ids[I any](items []I, id func(I) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, id(it))
	}
	sort.Strings(out)
	return out
}

// TestStreamingLists: on the real engine, each streaming list of the CRI v1.37
// (KEP-5825) answers what its unary list answers: the same sandboxes, containers,
// images (the sandbox image pinned), stats and metrics, each once.
func TestStreamingLists(t *testing.T) {
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	ctx := context.Background()
	for _, name := range []string{"stream-a", "stream-b"} {
		pod := podConfig(name)
		podID := runPod(t, s, pod)
		t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
		startContainer(t, s, podID, pod, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: pauseRef},
			Linux:    &runtimeapi.LinuxContainerConfig{},
		})
	}

	sandboxes, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	ps, err := s.rt.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{})
	assert.NilError(t, err)
	sandboxID := (*runtimeapi.PodSandbox).GetId
	want := ids(sandboxes.Items, sandboxID)
	assert.Check(t, len(want) >= 2)
	assert.Check(t, is.DeepEqual(drain(t, ps, (*runtimeapi.StreamPodSandboxesResponse).GetPodSandboxes, sandboxID), want))

	containers, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	assert.NilError(t, err)
	cs, err := s.rt.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	assert.NilError(t, err)
	containerID := (*runtimeapi.Container).GetId
	want = ids(containers.Containers, containerID)
	assert.Check(t, len(want) >= 2)
	assert.Check(t, is.DeepEqual(drain(t, cs, (*runtimeapi.StreamContainersResponse).GetContainers, containerID), want))

	images, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	ims, err := s.img.StreamImages(ctx, &runtimeapi.StreamImagesRequest{})
	assert.NilError(t, err)
	pinnedID := func(img *runtimeapi.Image) string {
		if img.GetPinned() {
			return "pinned " + img.GetId()
		}
		return img.GetId()
	}
	want = ids(images.Images, pinnedID)
	got := drain(t, ims, (*runtimeapi.StreamImagesResponse).GetImages, pinnedID)
	assert.Check(t, is.DeepEqual(got, want))
	assert.Check(t, is.Contains(got, "pinned "+imageID(t, pauseRef)), "the sandbox image is pinned in the stream")

	stats, err := s.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	assert.NilError(t, err)
	css, err := s.rt.StreamContainerStats(ctx, &runtimeapi.StreamContainerStatsRequest{})
	assert.NilError(t, err)
	statsID := func(st *runtimeapi.ContainerStats) string { return st.GetAttributes().GetId() }
	assert.Check(t, is.DeepEqual(drain(t, css, (*runtimeapi.StreamContainerStatsResponse).GetContainerStats, statsID), ids(stats.Stats, statsID)))

	podStats, err := s.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	assert.NilError(t, err)
	pss, err := s.rt.StreamPodSandboxStats(ctx, &runtimeapi.StreamPodSandboxStatsRequest{})
	assert.NilError(t, err)
	podStatsID := func(st *runtimeapi.PodSandboxStats) string { return st.GetAttributes().GetId() }
	assert.Check(t, is.DeepEqual(drain(t, pss, (*runtimeapi.StreamPodSandboxStatsResponse).GetPodSandboxStats, podStatsID), ids(podStats.Stats, podStatsID)))

	metrics, err := s.rt.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	assert.NilError(t, err)
	pms, err := s.rt.StreamPodSandboxMetrics(ctx, &runtimeapi.StreamPodSandboxMetricsRequest{})
	assert.NilError(t, err)
	metricsID := (*runtimeapi.PodSandboxMetrics).GetPodSandboxId
	assert.Check(t, is.DeepEqual(drain(t, pms, (*runtimeapi.StreamPodSandboxMetricsResponse).GetPodSandboxMetrics, metricsID), ids(metrics.PodMetrics, metricsID)))
}
