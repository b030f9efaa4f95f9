package pinproxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// Image IDs used across tests.
var (
	idPlain   = "sha256:" + strings.Repeat("a", 64)
	idPattern = "sha256:" + strings.Repeat("b", 64)
	idLabel   = "sha256:" + strings.Repeat("c", 64)
	idBackend = "sha256:" + strings.Repeat("d", 64)
)

// fakeBackend is an in-memory CRI: a few images (one pinned by the backend itself),
// a container event stream, an exec URL, NotFound for any pod.
type fakeBackend struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	images []*runtimeapi.Image
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{images: []*runtimeapi.Image{
		{Id: idPlain, RepoTags: []string{"example.com/plain:1"}, Size: 1},
		{Id: idPattern, RepoTags: []string{"example.com/app:1"}, Size: 2},
		{Id: idLabel, RepoTags: []string{"example.com/labelled:1"}, Size: 3},
		{Id: idBackend, RepoTags: []string{"example.com/backend:1"}, Size: 4, Pinned: true},
	}}
}

func (b *fakeBackend) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func (b *fakeBackend) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	var out []*runtimeapi.Image
	for _, img := range b.images {
		if f := req.GetFilter().GetImage().GetImage(); f == "" || img.RepoTags[0] == f {
			out = append(out, img)
		}
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// StreamImages sends the images one a message, so that a proxy has chunks to keep apart.
func (b *fakeBackend) StreamImages(_ *runtimeapi.StreamImagesRequest, s grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	for _, img := range b.images {
		if err := s.Send(&runtimeapi.StreamImagesResponse{Images: []*runtimeapi.Image{img}}); err != nil {
			return err
		}
	}
	return nil
}

func (b *fakeBackend) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	for _, img := range b.images {
		if img.RepoTags[0] == req.GetImage().GetImage() || img.Id == req.GetImage().GetImage() {
			return &runtimeapi.ImageStatusResponse{Image: img, Info: map[string]string{"backend": "yes"}}, nil
		}
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (b *fakeBackend) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if req.PodSandboxId == "pod-1" {
		return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
			Id: "pod-1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u1"},
			Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"},
		}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "pod %s not found", req.PodSandboxId)
}

func (b *fakeBackend) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{{Type: "RuntimeReady", Status: true}}}}
	if req.Verbose {
		resp.Info = map[string]string{"config": `{"backend":true}`}
	}
	return resp, nil
}

func (b *fakeBackend) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "c1"}, {Id: "c2"}}}, nil
}

func (b *fakeBackend) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return &runtimeapi.ExecResponse{Url: "http://127.0.0.1:1234/exec/" + req.ContainerId}, nil
}

func (b *fakeBackend) GetContainerEvents(req *runtimeapi.GetEventsRequest, s grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	for _, id := range []string{"e1", "e2", "e3"} {
		if err := s.Send(&runtimeapi.ContainerEventResponse{ContainerId: id}); err != nil {
			return err
		}
	}
	return nil
}

// echoService is a test-only service no CRI build knows: "/dockpin.test.Echo/Say"
// answers its StringValue request upper-cased.
var echoService = grpc.ServiceDesc{
	ServiceName: "dockpin.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Say", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in wrapperspb.StringValue
		if err := dec(&in); err != nil {
			return nil, err
		}
		return wrapperspb.String(strings.ToUpper(in.Value)), nil
	}}},
}

// backendNet is the backend's in-process network: the backend can go away and come
// back on it (a new listener, as a restarted process would).
type backendNet struct {
	images []*runtimeapi.Image // the backend's images; nil: newFakeBackend's few
	mu     sync.Mutex
	lis    *bufconn.Listener
	srv    *grpc.Server
}

func (n *backendNet) start(t testing.TB) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	b := newFakeBackend()
	if n.images != nil {
		b.images = n.images
	}
	runtimeapi.RegisterRuntimeServiceServer(srv, b)
	runtimeapi.RegisterImageServiceServer(srv, b)
	srv.RegisterService(&echoService, struct{}{})
	go func() { _ = srv.Serve(lis) }()
	n.mu.Lock()
	n.lis, n.srv = lis, srv
	n.mu.Unlock()
}

func (n *backendNet) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Stop()
		n.lis, n.srv = nil, nil
	}
}

func (n *backendNet) dial(ctx context.Context, _ string) (net.Conn, error) {
	n.mu.Lock()
	lis := n.lis
	n.mu.Unlock()
	if lis == nil {
		return nil, errors.New("backend is down")
	}
	return lis.DialContext(ctx)
}

// fakeEngine holds config labels by image ID.
type fakeEngine struct {
	labels    map[string]map[string]string
	err       error
	unindexed map[string]bool // images ImageLabels leaves out (not indexed yet), ImageLabelsOf knows
	oneErr    error           // ImageLabelsOf's error
	calls     int             // ImageLabelsOf calls
}

func (e *fakeEngine) ImageLabels(context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for id, l := range e.labels {
		if !e.unindexed[id] {
			out[id] = l
		}
	}
	return out, e.err
}

func (e *fakeEngine) ImageLabelsOf(_ context.Context, id string) (map[string]string, error) {
	e.calls++
	if e.err != nil {
		return nil, e.err
	}
	if e.oneErr != nil {
		return nil, e.oneErr
	}
	l, ok := e.labels[id]
	if !ok {
		return nil, cerrdefs.ErrNotFound
	}
	return l, nil
}

// failingSource never answers: with no saved state, Evaluate refuses.
type failingSource struct{}

func (failingSource) Name() string { return "broken" }
func (failingSource) Snapshot(context.Context) (pin.Matcher, error) {
	return nil, errors.New("source down")
}

// harness is the proxy in front of the fake backend, with a CRI client of the proxy.
type harness struct {
	backend *backendNet
	conn    *grpc.ClientConn // to the proxy
	direct  *grpc.ClientConn // to the backend, bypassing the proxy
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
}

// newHarness starts the backend and the proxy; the proxy pins example.com/app and
// images labelled io.cri-containerd.pinned=pinned, plus whatever sources are given.
func newHarness(t testing.TB, sources ...pin.Source) *harness {
	t.Helper()
	return newHarnessWithEngine(t, &fakeEngine{labels: map[string]map[string]string{
		idPlain: {"a": "b"},
		idLabel: {pin.PinnedLabel: pin.PinnedValue},
	}}, sources...)
}

// newHarnessWithEngine is newHarness with the engine given.
func newHarnessWithEngine(t testing.TB, engine Engine, sources ...pin.Source) *harness {
	t.Helper()
	return newHarnessOn(t, &backendNet{}, engine, sources...)
}

// newHarnessOn is newHarness with the backend's network (and images) and the engine given.
func newHarnessOn(t testing.TB, backend *backendNet, engine Engine, sources ...pin.Source) *harness {
	t.Helper()
	h := &harness{backend: backend}
	h.backend.start(t)
	t.Cleanup(h.backend.stop)
	h.direct, _ = grpc.NewClient("passthrough:///backend", grpc.WithContextDialer(h.backend.dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { _ = h.direct.Close() })

	cfg := pinner.DefaultConfig()
	cfg.SandboxImage = "example.com/pause:3"
	cfg.Patterns = []string{"example.com/app"}
	cfg.StateDir = t.TempDir()
	pins, err := pinner.New(cfg, logctx.Discard(), sources...)
	assert.NilError(t, err)
	backendConn, err := Dial("passthrough:///backend", grpc.WithContextDialer(h.backend.dial))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = backendConn.Close() })
	p := New(backendConn, pins, engine, logctx.Discard())

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(p.ServerOptions()...)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	h.conn, err = grpc.NewClient("passthrough:///proxy",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = h.conn.Close() })
	h.rt, h.img = runtimeapi.NewRuntimeServiceClient(h.conn), runtimeapi.NewImageServiceClient(h.conn)
	return h
}
