package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/internal/metrics"
)

func TestInterceptorConvertsErrdefsOnce(t *testing.T) {
	log := logctx.Discard()
	ic := &interceptor{log: log, timeout: time.Minute}
	tests := []struct {
		err  error
		code codes.Code
	}{
		{err: fmt.Errorf("image reference is empty: %w", cerrdefs.ErrInvalidArgument), code: codes.InvalidArgument},
		{err: fmt.Errorf("list images: %w", cerrdefs.ErrUnavailable), code: codes.Unavailable},
		{err: fmt.Errorf("x: %w", cerrdefs.ErrNotFound), code: codes.NotFound},
		{err: fmt.Errorf("in use: %w", cerrdefs.ErrConflict), code: codes.FailedPrecondition},
		{err: context.DeadlineExceeded, code: codes.DeadlineExceeded},
		{err: errors.New("plain"), code: codes.Unknown},
	}
	for _, tc := range tests {
		_, err := ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.ImageService/ListImages"},
			func(context.Context, any) (any, error) { return nil, tc.err })
		assert.Equal(t, status.Code(err), tc.code, tc.err.Error())
		assert.Equal(t, status.Convert(err).Message(), tc.err.Error())
	}
}

func TestInterceptorDeadlines(t *testing.T) {
	log := logctx.Discard()
	ic := &interceptor{log: log, timeout: time.Minute}
	deadline := func(method string) bool {
		var has bool
		_, _ = ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
			func(ctx context.Context, _ any) (any, error) { _, has = ctx.Deadline(); return nil, nil })
		return has
	}
	assert.Check(t, deadline("/runtime.v1.ImageService/ListImages"))
	assert.Check(t, !deadline("/runtime.v1.ImageService/PullImage"), "pulls are bounded by the progress deadline instead")
}

func TestInterceptorStreamDeadlines(t *testing.T) {
	ic := &interceptor{log: logctx.Discard(), timeout: time.Minute}
	deadline := func(method string) bool {
		var has bool
		assert.NilError(t, ic.stream(nil, &ctxStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: method},
			func(_ any, ss grpc.ServerStream) error { _, has = ss.Context().Deadline(); return nil }))
		return has
	}
	assert.Check(t, deadline("/runtime.v1.RuntimeService/StreamContainers"), "a streaming list is a list")
	assert.Check(t, !deadline("/runtime.v1.RuntimeService/GetContainerEvents"), "an event stream lives on")
}

// TestInterceptorRefusesListsOverTheLimit shows a list answer gRPC would refuse to
// send failing with ResourceExhausted that names the streaming RPC.
func TestInterceptorRefusesListsOverTheLimit(t *testing.T) {
	ic := &interceptor{log: logctx.Discard(), timeout: time.Minute}
	containers := func(n int) *runtimeapi.ListContainersResponse {
		resp := &runtimeapi.ListContainersResponse{}
		for i := range n {
			resp.Containers = append(resp.Containers, &runtimeapi.Container{
				Id: fmt.Sprintf("%064d", i), Labels: map[string]string{"pad": strings.Repeat("x", 1400)},
			})
		}
		return resp
	}
	call := func(method string, resp any) error {
		_, err := ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) { return resp, nil })
		return err
	}
	assert.NilError(t, call("/runtime.v1.RuntimeService/ListContainers", containers(1000)))
	err := call("/runtime.v1.RuntimeService/ListContainers", containers(12000))
	assert.Equal(t, status.Code(err), codes.ResourceExhausted)
	assert.Check(t, is.Contains(status.Convert(err).Message(), "use StreamContainers"))
	podStats := &runtimeapi.ListPodSandboxStatsResponse{}
	for range 100 {
		podStats.Stats = append(podStats.Stats, &runtimeapi.PodSandboxStats{Attributes: &runtimeapi.PodSandboxAttributes{
			Annotations: map[string]string{"pad": strings.Repeat("x", maxMsgSize/64)}}})
	}
	err = call("/runtime.v1.RuntimeService/ListPodSandboxStats", podStats)
	assert.Check(t, is.Contains(status.Convert(err).Message(), "use StreamPodSandboxStats"))
	// Too few items to be measured: gRPC's own limit answers for them.
	podStats.Stats = podStats.Stats[:99]
	podStats.Stats[0].Attributes.Annotations["pad"] = strings.Repeat("x", maxMsgSize)
	assert.NilError(t, call("/runtime.v1.RuntimeService/ListPodSandboxStats", podStats))
	for rpc, stream := range map[string]string{
		"ListPodSandbox": "StreamPodSandboxes", "ListImages": "StreamImages", "ListContainerStats": "StreamContainerStats",
		"ListPodSandboxMetrics": "StreamPodSandboxMetrics", "ListMetricDescriptors": "", "Status": "",
	} {
		assert.Check(t, is.Equal(streamingList(rpc), stream), rpc)
	}
}

func TestInterceptorLogsPhasesAtDebug(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	ic := &interceptor{log: log, timeout: time.Minute}
	_, err := ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/RunPodSandbox"},
		func(ctx context.Context, _ any) (any, error) {
			logctx.Time(ctx, "engine.containers.create")()
			logctx.Time(ctx, "cni.bridge.add")()
			return nil, nil
		})
	assert.NilError(t, err)
	var phases *logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Message == "request phases" {
			phases = e
		}
	}
	assert.Assert(t, phases != nil, "no phases line")
	assert.Equal(t, phases.Level, logrus.DebugLevel)
	assert.Equal(t, phases.Data["rpc"], "RunPodSandbox")
	for _, k := range []string{"t.engine.containers.create", "t.cni.bridge.add", "t.rest"} {
		_, ok := phases.Data[k]
		assert.Check(t, ok, "no field %s in %v", k, phases.Data)
	}
}

func TestPolling(t *testing.T) {
	for rpc, want := range map[string]bool{
		"ListImages": true, "ImageStatus": true, "ImageFsInfo": true, "Version": true, "Status": true,
		"StreamContainers": true, "StreamImages": true,
		"PullImage": false, "RemoveImage": false, "RunPodSandbox": false, "GetContainerEvents": false,
	} {
		assert.Equal(t, polling(rpc), want, rpc)
	}
}

// panicky is a CRI server whose ListImages and StreamImages panic and whose
// Version answers, to show that a panic fails its request and nothing more.
type panicky struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
}

func (panicky) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	panic("list boom")
}

func (panicky) StreamImages(*runtimeapi.StreamImagesRequest, grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	panic("stream boom")
}

func (panicky) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "test"}, nil
}

// serveBuf serves srv on an in-memory listener until the test ends and returns a client
// connection to it.
func serveBuf(t *testing.T, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		assert.NilError(t, <-served)
	})
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestServerRecoversPanickingHandler(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	conn := serveBuf(t, newGRPCServer(panicky{}, log, time.Minute, nil))
	images := runtimeapi.NewImageServiceClient(conn)
	runtime := runtimeapi.NewRuntimeServiceClient(conn)
	ctx := context.Background()

	_, err := images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.Equal(t, status.Code(err), codes.Internal, "%v", err)
	assert.Check(t, strings.Contains(status.Convert(err).Message(), "ListImages"), status.Convert(err).Message())
	panics := panicEntries(hook)
	assert.Assert(t, len(panics) == 1, "one error-level entry per panic")
	assert.Equal(t, panics[0].Data["rpc"], "ListImages")
	assert.Check(t, strings.Contains(panics[0].Data["stack"].(string), "panicky.ListImages"), "the stack names the handler")

	stream, err := images.StreamImages(ctx, &runtimeapi.StreamImagesRequest{})
	assert.NilError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, status.Code(err), codes.Internal, "%v", err)
	assert.Check(t, strings.Contains(status.Convert(err).Message(), "StreamImages"), status.Convert(err).Message())
	assert.Equal(t, len(panicEntries(hook)), 2)

	// The daemon is still up: the next request on the same connection is answered.
	v, err := runtime.Version(ctx, &runtimeapi.VersionRequest{})
	assert.NilError(t, err)
	assert.Equal(t, v.RuntimeName, "test")
}

func panicEntries(hook *logtest.Hook) []logrus.Entry {
	var out []logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.ErrorLevel {
			if _, ok := e.Data["stack"]; ok {
				out = append(out, *e)
			}
		}
	}
	return out
}

// handled is grpc_server_handled_total for method and code in reg.
func handled(t *testing.T, reg prometheus.Gatherer, method, code string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	assert.NilError(t, err)
	for _, f := range fams {
		if f.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["grpc_method"] == method && labels["grpc_code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestServerCountsRPCs: with metrics, every RPC is counted by method and by the code the
// client got, after our interceptor's recovery and conversion (a panic counts as Internal).
func TestServerCountsRPCs(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	m := metrics.New(metrics.Build{})
	conn := serveBuf(t, newGRPCServer(panicky{}, log, time.Minute, m))
	images := runtimeapi.NewImageServiceClient(conn)
	runtime := runtimeapi.NewRuntimeServiceClient(conn)
	ctx := context.Background()

	assert.Check(t, is.Equal(handled(t, m.Registry(), "Version", "OK"), 0.0))
	for range 2 {
		_, err := runtime.Version(ctx, &runtimeapi.VersionRequest{})
		assert.NilError(t, err)
	}
	_, err := images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.Equal(t, status.Code(err), codes.Internal)
	_, err = images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{})
	assert.Equal(t, status.Code(err), codes.Unimplemented)

	assert.Check(t, is.Equal(handled(t, m.Registry(), "Version", "OK"), 2.0))
	assert.Check(t, is.Equal(handled(t, m.Registry(), "ListImages", "Internal"), 1.0))
	assert.Check(t, is.Equal(handled(t, m.Registry(), "ListImages", "OK"), 0.0))
	assert.Check(t, is.Equal(handled(t, m.Registry(), "ImageStatus", "Unimplemented"), 1.0))
}
