package pinning

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// fakeContainerd is a stateful containerd Images service: records per namespace,
// presence filters on labels, field-path label updates, and a List call counter.
type fakeContainerd struct {
	imagesapi.UnimplementedImagesServer
	mu      sync.Mutex
	records map[string]map[string]*imagesapi.Image // namespace -> name -> record
	lists   int
}

func newFakeContainerd() *fakeContainerd {
	return &fakeContainerd{records: map[string]map[string]*imagesapi.Image{}}
}

func (f *fakeContainerd) put(ns, name, digest string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.records[ns] == nil {
		f.records[ns] = map[string]*imagesapi.Image{}
	}
	f.records[ns][name] = &imagesapi.Image{Name: name, Labels: labels, Target: &types.Descriptor{Digest: digest}}
}

func (f *fakeContainerd) labels(ns, name string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.records[ns][name].GetLabels()
}

func namespaceOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(containerdNamespaceHeader); len(v) > 0 {
		return v[0]
	}
	return ""
}

var presenceFilter = regexp.MustCompile(`^labels\."([^"]+)"$`)

func (f *fakeContainerd) List(ctx context.Context, req *imagesapi.ListImagesRequest) (*imagesapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var keys []string
	for _, flt := range req.GetFilters() {
		m := presenceFilter.FindStringSubmatch(flt)
		if m == nil {
			return nil, status.Errorf(codes.InvalidArgument, "fake supports only label presence filters, got %q", flt)
		}
		keys = append(keys, m[1])
	}
	resp := &imagesapi.ListImagesResponse{}
	for _, rec := range f.records[namespaceOf(ctx)] {
		for _, k := range keys {
			if _, ok := rec.Labels[k]; ok {
				resp.Images = append(resp.Images, rec)
				break
			}
		}
	}
	return resp, nil
}

func (f *fakeContainerd) Get(ctx context.Context, req *imagesapi.GetImageRequest) (*imagesapi.GetImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.records[namespaceOf(ctx)][req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "image %q: not found", req.GetName())
	}
	return &imagesapi.GetImageResponse{Image: rec}, nil
}

func (f *fakeContainerd) Update(ctx context.Context, req *imagesapi.UpdateImageRequest) (*imagesapi.UpdateImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.records[namespaceOf(ctx)][req.GetImage().GetName()]
	if !ok {
		return nil, status.Error(codes.NotFound, "not found")
	}
	if req.GetImage().GetTarget() == nil {
		// containerd 2.4 dereferences the target whatever the field mask says (it crashed).
		return nil, status.Error(codes.InvalidArgument, "update without a target")
	}
	for _, p := range req.GetUpdateMask().GetPaths() {
		key, ok := strings.CutPrefix(p, "labels.")
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "fake supports only labels.* paths, got %q", p)
		}
		if rec.Labels == nil {
			rec.Labels = map[string]string{}
		}
		rec.Labels[key] = req.GetImage().GetLabels()[key]
	}
	return &imagesapi.UpdateImageResponse{Image: rec}, nil
}

// serveFake serves f on a fresh unix socket and returns its path and a stop function.
func serveFake(t *testing.T, f *fakeContainerd, sock string) func() {
	t.Helper()
	lis, err := net.Listen("unix", sock)
	assert.NilError(t, err)
	srv := grpc.NewServer()
	imagesapi.RegisterImagesServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	return srv.Stop
}

func fakeSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctrd")
	assert.NilError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "containerd.sock")
}

func newTestContainerdSource(t *testing.T, sock string, dangling bool) (*ContainerdSource, *test.Hook) {
	t.Helper()
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	src, err := NewContainerdSource(ContainerdConfig{Address: sock, Namespace: "moby", IncludeDangling: dangling, Timeout: 500 * time.Millisecond}, log)
	assert.NilError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	return src, hook
}

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	digestD = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
)

func TestContainerdSourceSnapshot(t *testing.T) {
	fake := newFakeContainerd()
	sock := fakeSocket(t)
	defer serveFake(t, fake, sock)()
	pinned := map[string]string{PinnedLabel: PinnedValue}
	fake.put("moby", "docker.io/library/a:1", digestA, nil)
	fake.put("moby", "docker.io/library/a:2", digestA, pinned) // any record of an image counts
	fake.put("moby", "docker.io/library/true:1", digestB, map[string]string{PinnedLabel: "true"})
	fake.put("moby", "docker.io/library/typo:1", digestB, map[string]string{MisspelledLabel: PinnedValue})
	fake.put("moby", DanglingPrefix+digestC, digestC, pinned)
	fake.put("other", "docker.io/library/d:1", digestD, pinned) // another namespace

	for _, tc := range []struct {
		dangling bool
		want     map[string]bool
	}{
		{dangling: false, want: map[string]bool{digestA: true, digestB: false, digestC: false, digestD: false}},
		{dangling: true, want: map[string]bool{digestA: true, digestB: false, digestC: true, digestD: false}},
	} {
		src, hook := newTestContainerdSource(t, sock, tc.dangling)
		m, err := src.Snapshot(context.Background())
		assert.NilError(t, err)
		for d, want := range tc.want {
			got := m.Match(&Image{ID: d})
			assert.Equal(t, len(got) > 0, want, "digest %s dangling=%v", d[:12], tc.dangling)
		}
		assert.DeepEqual(t, m.Match(&Image{ID: digestA}), []Reason{{Source: SourceContainerd, Detail: "record docker.io/library/a:2"}})
		var warned []string
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				warned = append(warned, e.Data["label"].(string))
			}
		}
		assert.DeepEqual(t, len(warned), 2)
		// A second snapshot inside the warn interval does not warn again.
		hook.Reset()
		_, err = src.Snapshot(context.Background())
		assert.NilError(t, err)
		assert.Equal(t, len(hook.AllEntries()), 0)
		st := src.SourceStatus()
		assert.Equal(t, st["namespace"], "moby")
		assert.Equal(t, st["pinnedRecords"], map[bool]int{false: 1, true: 2}[tc.dangling])
	}
}

func TestContainerdSourceOneListPerEvaluateAndOutage(t *testing.T) {
	fake := newFakeContainerd()
	sock := fakeSocket(t)
	stop := serveFake(t, fake, sock)
	fake.put("moby", "docker.io/library/a:1", digestA, map[string]string{PinnedLabel: PinnedValue})
	src, _ := newTestContainerdSource(t, sock, false)
	cfg := DefaultConfig()
	cfg.SnapshotTTL = 0
	p, err := New(cfg, nil, src)
	assert.NilError(t, err)
	imgs := []Image{{ID: digestA, RepoTags: []string{"a:1"}}, {ID: digestB, RepoTags: []string{"b:1"}}}

	res := p.Evaluate(context.Background(), imgs)
	assert.Check(t, len(res[0]) == 1 && len(res[1]) == 0)
	assert.Equal(t, fake.lists, 1, "one List call per Evaluate, whatever the image count")

	// containerd goes away: the last good set still answers, nothing fails.
	stop()
	fake.put("moby", "docker.io/library/b:1", digestB, map[string]string{PinnedLabel: PinnedValue})
	res = p.Evaluate(context.Background(), imgs)
	assert.Check(t, len(res[0]) == 1 && len(res[1]) == 0, "outage must keep the last good pins: %v", res)
	info := p.Info()["sources"].([]map[string]any)
	assert.Equal(t, info[0]["healthy"], false)
	assert.Equal(t, info[0]["usingStale"], true)

	// It comes back on the same socket: changes are seen again.
	_ = os.Remove(sock) // grpc's Stop may have removed it already
	defer serveFake(t, fake, sock)()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		res := p.Evaluate(context.Background(), imgs)
		if len(res[1]) == 0 {
			return poll.Continue("b not pinned yet")
		}
		return poll.Success()
	}, poll.WithTimeout(20*time.Second), poll.WithDelay(100*time.Millisecond))
}

func TestContainerdKeepPin(t *testing.T) {
	fake := newFakeContainerd()
	sock := fakeSocket(t)
	defer serveFake(t, fake, sock)()
	src, _ := newTestContainerdSource(t, sock, false)
	ctx := context.Background()
	pinned := map[string]string{PinnedLabel: PinnedValue, "other": "x"}
	fake.put("moby", "docker.io/library/busybox:latest", digestA, pinned)
	fake.put("moby", "docker.io/library/plain:1", digestB, map[string]string{"other": "x"})

	after := src.KeepPin(ctx, "busybox")
	fake.put("moby", "docker.io/library/busybox:latest", digestC, map[string]string{"from": "pull"}) // the pull replaced the record
	after(ctx)
	assert.DeepEqual(t, fake.labels("moby", "docker.io/library/busybox:latest"),
		map[string]string{"from": "pull", PinnedLabel: PinnedValue}) // exactly the pin label put back

	after = src.KeepPin(ctx, "plain:1")
	fake.put("moby", "docker.io/library/plain:1", digestD, map[string]string{"from": "pull"})
	after(ctx)
	assert.DeepEqual(t, fake.labels("moby", "docker.io/library/plain:1"), map[string]string{"from": "pull"})

	src.KeepPin(ctx, "never-pulled:1")(ctx) // no record: nothing to keep, no error
}
