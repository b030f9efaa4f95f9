package core

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sink is a server stream that keeps what is sent on it, failing from send number
// failAt (counted from 1) when set.
type sink[T any] struct {
	grpc.ServerStream
	ctx    context.Context
	sent   []*T
	failAt int
}

func newSink[T any]() *sink[T] { return &sink[T]{ctx: context.Background()} }

func (s *sink[T]) Context() context.Context { return s.ctx }

func (s *sink[T]) Send(m *T) error {
	if s.failAt > 0 && len(s.sent)+1 >= s.failAt {
		return errors.New("client went away")
	}
	s.sent = append(s.sent, m)
	return nil
}

// bulky is a container whose encoded size is about n bytes.
func bulky(id string, n int) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, Labels: map[string]string{"pad": strings.Repeat("x", n)}}
}

func TestSendChunks(t *testing.T) {
	var items []*runtimeapi.Container
	for i := range 3000 {
		items = append(items, bulky("c"+strconv.Itoa(i), 1000))
	}
	var chunks [][]*runtimeapi.Container
	assert.NilError(t, sendChunks(items, func(part []*runtimeapi.Container) error {
		chunks = append(chunks, part)
		return nil
	}))
	assert.Check(t, len(chunks) > 1, "3 MB went in %d message(s)", len(chunks))
	seen := map[string]bool{}
	var total int
	for _, c := range chunks {
		assert.Check(t, len(c) > 0, "an empty message")
		size := proto.Size(&runtimeapi.ListContainersResponse{Containers: c})
		assert.Check(t, size <= streamChunkBytes, "a message of %d bytes", size)
		for _, item := range c {
			assert.Check(t, !seen[item.Id], "%s sent twice", item.Id)
			seen[item.Id] = true
			assert.Equal(t, item.Id, items[total].Id, "out of order")
			total++
		}
	}
	assert.Equal(t, total, len(items))

	// Nothing to send: no message at all.
	calls := 0
	assert.NilError(t, sendChunks([]*runtimeapi.Container{}, func([]*runtimeapi.Container) error { calls++; return nil }))
	assert.Equal(t, calls, 0)

	// An item larger than a chunk goes alone, with its neighbours in messages of their own.
	big := []*runtimeapi.Container{bulky("a", 10), bulky("huge", 2*streamChunkBytes), bulky("b", 10)}
	var sizes []int
	assert.NilError(t, sendChunks(big, func(part []*runtimeapi.Container) error { sizes = append(sizes, len(part)); return nil }))
	assert.DeepEqual(t, sizes, []int{1, 1, 1})

	// The first failed send ends the stream with its error.
	calls = 0
	err := sendChunks(items, func([]*runtimeapi.Container) error { calls++; return errors.New("gone") })
	assert.Error(t, err, "gone")
	assert.Equal(t, calls, 1)
}

// TestStreamingListsAreTheUnaryLists shows that each streaming list answers what its
// unary list answers for the same filter, every item once.
func TestStreamingListsAreTheUnaryLists(t *testing.T) {
	env := newRTEnv(t)
	webCfg := rtSandboxConfig("web")
	web := env.runSandbox(t, webCfg)
	app := env.runContainer(t, web, webCfg, "app")
	dbCfg := rtSandboxConfig("db")
	db := env.runSandbox(t, dbCfg)
	sql := env.runContainer(t, db, dbCfg, "sql")
	env.engine.SetStats(web, rtSample(1, time.Now()))
	env.engine.SetStats(app, rtSample(2, time.Now()))
	env.engine.SetStats(db, rtSample(3, time.Now()))
	env.engine.SetStats(sql, rtSample(4, time.Now()))
	ctx := context.Background()
	same := func(t *testing.T, want, got any) {
		t.Helper()
		if diff := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&runtimeapi.CpuUsage{}, "timestamp"),
			protocmp.IgnoreFields(&runtimeapi.MemoryUsage{}, "timestamp")); diff != "" {
			t.Errorf("stream differs from the list (-list +stream):\n%s", diff)
		}
	}

	t.Run("containers", func(t *testing.T) {
		for _, f := range []*runtimeapi.ContainerFilter{nil, {PodSandboxId: db}} {
			list, err := env.svc.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
			assert.NilError(t, err)
			same(t, list.Containers, streamed(t, func(ss grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
				return env.svc.StreamContainers(&runtimeapi.StreamContainersRequest{Filter: f}, ss)
			}, (*runtimeapi.StreamContainersResponse).GetContainers))
		}
	})
	t.Run("sandboxes", func(t *testing.T) {
		for _, f := range []*runtimeapi.PodSandboxFilter{nil, {Id: web}} {
			list, err := env.svc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
			assert.NilError(t, err)
			same(t, list.Items, streamed(t, func(ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
				return env.svc.StreamPodSandboxes(&runtimeapi.StreamPodSandboxesRequest{Filter: f}, ss)
			}, (*runtimeapi.StreamPodSandboxesResponse).GetPodSandboxes))
		}
	})
	t.Run("images", func(t *testing.T) {
		list, err := env.svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		assert.NilError(t, err)
		assert.Check(t, len(list.Images) > 0)
		got := streamed(t, func(ss grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
			return env.svc.StreamImages(&runtimeapi.StreamImagesRequest{}, ss)
		}, (*runtimeapi.StreamImagesResponse).GetImages)
		same(t, list.Images, got)
		pinned := slices.DeleteFunc(got, func(img *runtimeapi.Image) bool { return !img.Pinned })
		assert.Equal(t, len(pinned), 1, "the sandbox image is pinned in the stream too")
	})
	t.Run("container stats", func(t *testing.T) {
		f := &runtimeapi.ContainerStatsFilter{PodSandboxId: web}
		list, err := env.svc.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: f})
		assert.NilError(t, err)
		assert.Check(t, is.Len(list.Stats, 1))
		same(t, list.Stats, streamed(t, func(ss grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
			return env.svc.StreamContainerStats(&runtimeapi.StreamContainerStatsRequest{Filter: f}, ss)
		}, (*runtimeapi.StreamContainerStatsResponse).GetContainerStats))
	})
	t.Run("pod sandbox stats", func(t *testing.T) {
		list, err := env.svc.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
		assert.NilError(t, err)
		assert.Check(t, is.Len(list.Stats, 2))
		ids := func(items []*runtimeapi.PodSandboxStats) []string {
			return sortedIDs(items, func(s *runtimeapi.PodSandboxStats) string { return s.GetAttributes().GetId() })
		}
		got := streamed(t, func(ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
			return env.svc.StreamPodSandboxStats(&runtimeapi.StreamPodSandboxStatsRequest{}, ss)
		}, (*runtimeapi.StreamPodSandboxStatsResponse).GetPodSandboxStats)
		assert.DeepEqual(t, ids(got), ids(list.Stats))
	})
	t.Run("pod sandbox metrics", func(t *testing.T) {
		stream := func(ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
			return env.svc.StreamPodSandboxMetrics(&runtimeapi.StreamPodSandboxMetricsRequest{}, ss)
		}
		err := stream(newSink[runtimeapi.StreamPodSandboxMetricsResponse]())
		assert.Check(t, cerrdefs.IsNotImplemented(err), "without a collector, as the unary list: %v", err)
		h := newRTMetrics(t, env)
		h.addProcess(t, web, 4101, 10)
		list, err := env.svc.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
		assert.NilError(t, err)
		assert.Equal(t, len(streamed(t, stream, (*runtimeapi.StreamPodSandboxMetricsResponse).GetPodSandboxMetrics)), len(list.PodMetrics))
	})
}

// streamed serves a streaming list on a sink and returns the items of all its messages.
func streamed[M any, I any](t *testing.T, serve func(grpc.ServerStreamingServer[M]) error, items func(*M) []I) []I {
	t.Helper()
	ss := newSink[M]()
	assert.NilError(t, serve(ss))
	var out []I
	for _, m := range ss.sent {
		out = append(out, items(m)...)
	}
	return out
}

func TestStreamingListErrors(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	web := env.runSandbox(t, cfg)
	env.runContainer(t, web, cfg, "app")

	// The engine's error is the stream's, before anything is sent.
	env.engine.InjectError("ListContainers", cerrdefs.ErrUnavailable)
	ss := newSink[runtimeapi.StreamContainersResponse]()
	err := env.svc.StreamContainers(&runtimeapi.StreamContainersRequest{}, ss)
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	assert.Check(t, is.Len(ss.sent, 0))

	// A client that goes away ends the stream with the send's error.
	env.engine.InjectError("ListContainers", nil)
	ss = newSink[runtimeapi.StreamContainersResponse]()
	ss.failAt = 1
	assert.Error(t, env.svc.StreamContainers(&runtimeapi.StreamContainersRequest{}, ss), "client went away")
}
