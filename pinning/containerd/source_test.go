package containerd

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
	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
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
	// failGets and failUpdates fail the next that many Get and Update calls (Unavailable).
	failGets, failUpdates int
}

// failNext makes the next gets Get and updates Update calls fail.
func (f *fakeContainerd) failNext(gets, updates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failGets, f.failUpdates = gets, updates
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
	if f.failGets > 0 {
		f.failGets--
		return nil, status.Error(codes.Unavailable, "injected get failure")
	}
	rec, ok := f.records[namespaceOf(ctx)][req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "image %q: not found", req.GetName())
	}
	return &imagesapi.GetImageResponse{Image: rec}, nil
}

func (f *fakeContainerd) Update(ctx context.Context, req *imagesapi.UpdateImageRequest) (*imagesapi.UpdateImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUpdates > 0 {
		f.failUpdates--
		return nil, status.Error(codes.Unavailable, "injected update failure")
	}
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

func newTestContainerdSource(t *testing.T, sock string, dangling bool) (*Source, *test.Hook) {
	t.Helper()
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	src, err := NewSource(Config{Address: sock, Namespace: "moby", IncludeDangling: dangling, Timeout: 500 * time.Millisecond}, log)
	assert.NilError(t, err)
	src.restoreRetry = time.Millisecond
	t.Cleanup(func() { _ = src.Close() })
	return src, hook
}

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	digestD = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	digestE = "sha256:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
)

func TestContainerdSourceSnapshot(t *testing.T) {
	fake := newFakeContainerd()
	sock := fakeSocket(t)
	defer serveFake(t, fake, sock)()
	pinned := map[string]string{pin.PinnedLabel: pin.PinnedValue}
	fake.put("moby", "docker.io/library/a:1", digestA, nil)
	fake.put("moby", "docker.io/library/a:2", digestA, pinned) // any record of an image counts
	fake.put("moby", "docker.io/library/true:1", digestB, map[string]string{pin.PinnedLabel: "true"})
	fake.put("moby", "docker.io/library/typo:1", digestB, map[string]string{pin.MisspelledLabel: pin.PinnedValue})
	fake.put("moby", pin.DanglingPrefix+digestC, digestC, pinned)
	fake.put("other", "docker.io/library/d:1", digestD, pinned) // another namespace
	// The pin label the sticky pins mirror from a preload archive does not pin by itself.
	fake.put("moby", "docker.io/library/pre:1", digestE, map[string]string{pin.PinnedLabel: pin.PinnedValue, pin.PreloadMarkerLabel: "true", pin.PreloadArchiveLabel: "a.tar"})

	for _, tc := range []struct {
		dangling bool
		want     map[string]bool
	}{
		{dangling: false, want: map[string]bool{digestA: true, digestB: false, digestC: false, digestD: false, digestE: false}},
		{dangling: true, want: map[string]bool{digestA: true, digestB: false, digestC: true, digestD: false, digestE: false}},
	} {
		src, hook := newTestContainerdSource(t, sock, tc.dangling)
		m, err := src.Snapshot(context.Background())
		assert.NilError(t, err)
		for d, want := range tc.want {
			got := m.Match(&pin.Image{ID: d})
			assert.Equal(t, len(got) > 0, want, "digest %s dangling=%v", d[:12], tc.dangling)
		}
		assert.DeepEqual(t, m.Match(&pin.Image{ID: digestA}), []pin.Reason{{Source: pin.SourceContainerd, Detail: "record docker.io/library/a:2"}})
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
	fake.put("moby", "docker.io/library/a:1", digestA, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	src, _ := newTestContainerdSource(t, sock, false)
	cfg := pinner.DefaultConfig()
	cfg.SnapshotTTL = 0
	p, err := pinner.New(cfg, nil, src)
	assert.NilError(t, err)
	imgs := []pin.Image{{ID: digestA, RepoTags: []string{"a:1"}}, {ID: digestB, RepoTags: []string{"b:1"}}}

	res := pintest.MustEvaluate(t, p, context.Background(), imgs)
	assert.Check(t, len(res[0]) == 1 && len(res[1]) == 0)
	assert.Equal(t, fake.lists, 1, "one List call per Evaluate, whatever the image count")

	// containerd goes away: the last good set still answers, nothing fails.
	stop()
	fake.put("moby", "docker.io/library/b:1", digestB, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	res = pintest.MustEvaluate(t, p, context.Background(), imgs)
	assert.Check(t, len(res[0]) == 1 && len(res[1]) == 0, "outage must keep the last good pins: %v", res)
	info := p.Info()["sources"].([]map[string]any)
	assert.Equal(t, info[0]["healthy"], false)
	assert.Equal(t, info[0]["usingStale"], true)

	// It comes back on the same socket: changes are seen again.
	_ = os.Remove(sock) // grpc's Stop may have removed it already
	defer serveFake(t, fake, sock)()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		res := pintest.MustEvaluate(t, p, context.Background(), imgs)
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
	pinned := map[string]string{pin.PinnedLabel: pin.PinnedValue, "other": "x"}
	fake.put("moby", "docker.io/library/busybox:latest", digestA, pinned)
	fake.put("moby", "docker.io/library/plain:1", digestB, map[string]string{"other": "x"})

	after := src.KeepPin(ctx, "busybox")
	fake.put("moby", "docker.io/library/busybox:latest", digestC, map[string]string{"from": "pull"}) // the pull replaced the record
	after(ctx)
	assert.DeepEqual(t, fake.labels("moby", "docker.io/library/busybox:latest"),
		map[string]string{"from": "pull", pin.PinnedLabel: pin.PinnedValue}) // exactly the pin label put back

	after = src.KeepPin(ctx, "plain:1")
	fake.put("moby", "docker.io/library/plain:1", digestD, map[string]string{"from": "pull"})
	after(ctx)
	assert.DeepEqual(t, fake.labels("moby", "docker.io/library/plain:1"), map[string]string{"from": "pull"})

	src.KeepPin(ctx, "never-pulled:1")(ctx) // no record: nothing to keep, no error
}

// keepPinEnv is a fake containerd with a pinned busybox:latest record and a source on it.
func keepPinEnv(t *testing.T) (*fakeContainerd, *Source) {
	t.Helper()
	fake := newFakeContainerd()
	sock := fakeSocket(t)
	t.Cleanup(serveFake(t, fake, sock))
	src, _ := newTestContainerdSource(t, sock, false)
	fake.put("moby", "docker.io/library/busybox:latest", digestA, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	fake.put("moby", "docker.io/library/plain:1", digestB, nil)
	return fake, src
}

// pulled is what the engine's pull does to a record: its labels are replaced.
func pulled(fake *fakeContainerd, name, digest string) {
	fake.put("moby", name, digest, map[string]string{"from": "pull"})
}

// pullKept pulls ref through src.KeepPin: the pull writes record name with digest;
// it returns the record's PinnedLabel afterwards.
func pullKept(ctx context.Context, fake *fakeContainerd, src *Source, ref, name, digest string) string {
	after := src.KeepPin(ctx, ref)
	pulled(fake, name, digest)
	after(ctx)
	return fake.labels("moby", name)[pin.PinnedLabel]
}

// TestContainerdKeepPinUnknownBeforePull: containerd cannot answer before the pull;
// after it, the last good snapshot decides, so the pin is not lost.
func TestContainerdKeepPinUnknownBeforePull(t *testing.T) {
	fake, src := keepPinEnv(t)
	ctx := context.Background()
	_, err := src.Snapshot(ctx)
	assert.NilError(t, err)

	fake.failNext(1, 0)
	assert.Equal(t, pullKept(ctx, fake, src, "busybox", "docker.io/library/busybox:latest", digestC), pin.PinnedValue)

	fake.failNext(1, 0) // plain:1 was not pinned in the snapshot: nothing to put back
	assert.Check(t, pullKept(ctx, fake, src, "plain:1", "docker.io/library/plain:1", digestD) == "")
}

// TestContainerdKeepPinFromSavedSnapshot: after a restart, before containerd answered
// once, the snapshot restored from the state directory stands for the labels.
func TestContainerdKeepPinFromSavedSnapshot(t *testing.T) {
	_, src := keepPinEnv(t)
	ctx := context.Background()
	m, err := src.Snapshot(ctx)
	assert.NilError(t, err)
	saved, err := src.EncodeSnapshot(m)
	assert.NilError(t, err)

	fake2, restarted := keepPinEnv(t) // a new process, a source that never listed
	_, err = restarted.DecodeSnapshot(saved)
	assert.NilError(t, err)
	fake2.failNext(1, 0)
	assert.Equal(t, pullKept(ctx, fake2, restarted, "busybox", "docker.io/library/busybox:latest", digestC), pin.PinnedValue)
	assert.Check(t, !restarted.wasPinned("docker.io/library/plain:1"))
}

// TestContainerdKeepPinOwnContext: kubelet cancelling its pull does not cancel the
// pin's reading or its restore.
func TestContainerdKeepPinOwnContext(t *testing.T) {
	fake, src := keepPinEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Equal(t, pullKept(ctx, fake, src, "busybox", "docker.io/library/busybox:latest", digestC), pin.PinnedValue)
}

// TestContainerdKeepPinRetries: a restore that fails is retried; one that keeps
// failing is logged and counted in the source's status.
func TestContainerdKeepPinRetries(t *testing.T) {
	fake, src := keepPinEnv(t)
	ctx := context.Background()
	after := src.KeepPin(ctx, "busybox")
	pulled(fake, "docker.io/library/busybox:latest", digestC)
	fake.failNext(0, restoreAttempts-1)
	after(ctx)
	assert.Equal(t, fake.labels("moby", "docker.io/library/busybox:latest")[pin.PinnedLabel], pin.PinnedValue)
	assert.Equal(t, src.SourceStatus()["pinRestores"].(map[string]any)["restored"], 1)

	after = src.KeepPin(ctx, "busybox")
	pulled(fake, "docker.io/library/busybox:latest", digestD)
	fake.failNext(0, restoreAttempts)
	after(ctx)
	assert.Check(t, fake.labels("moby", "docker.io/library/busybox:latest")[pin.PinnedLabel] == "")
	st := src.SourceStatus()["pinRestores"].(map[string]any)
	assert.Equal(t, st["failed"], 1)
	assert.Equal(t, st["lastFailedRecord"], "docker.io/library/busybox:latest")
	assert.Check(t, strings.Contains(st["lastError"].(string), "injected update failure"))
}

// TestContainerdKeepPinConcurrentPulls: a second pull of the same reference waits for
// the first one's restore, so it reads the label back, not the pull's empty labels.
func TestContainerdKeepPinConcurrentPulls(t *testing.T) {
	fake, src := keepPinEnv(t)
	ctx := context.Background()
	afterA := src.KeepPin(ctx, "busybox:latest")
	pulled(fake, "docker.io/library/busybox:latest", digestC) // A's pull replaced the record

	secondIn := make(chan func(context.Context))
	go func() { secondIn <- src.KeepPin(ctx, "docker.io/library/busybox") }()
	select {
	case <-secondIn:
		t.Fatal("the second pull's KeepPin ran while the first pull's restore was pending")
	case <-time.After(50 * time.Millisecond):
	}
	afterA(ctx)
	afterB := <-secondIn
	pulled(fake, "docker.io/library/busybox:latest", digestD) // B's pull
	afterB(ctx)
	assert.Equal(t, fake.labels("moby", "docker.io/library/busybox:latest")[pin.PinnedLabel], pin.PinnedValue)

	// Other references are not serialised with it.
	after := src.KeepPin(ctx, "busybox:latest")
	src.KeepPin(ctx, "plain:1")(ctx)
	after(ctx)
}

func TestContainerdSnapshotCodec(t *testing.T) {
	fake, src := keepPinEnv(t)
	fake.put("moby", "docker.io/library/busybox:1", digestA, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	m, err := src.Snapshot(context.Background())
	assert.NilError(t, err)
	b, err := src.EncodeSnapshot(m)
	assert.NilError(t, err)
	again, err := src.EncodeSnapshot(m)
	assert.NilError(t, err)
	assert.Equal(t, string(b), string(again), "equal snapshots encode equal")
	decoded, err := src.DecodeSnapshot(b)
	assert.NilError(t, err)
	img := &pin.Image{ID: digestA}
	assert.DeepEqual(t, decoded.Match(img), m.Match(img))
	_, err = src.DecodeSnapshot([]byte("{"))
	assert.Check(t, err != nil)
	_, err = src.EncodeSnapshot(pin.NoMatches{})
	assert.Check(t, err != nil)
}
