package sticky

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/internal/pinnertest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// fakeCtrd is a stateful containerd namespace: records, content blobs and leases.
type fakeCtrd struct {
	mu      sync.Mutex
	records map[string]containerd.Record
	blobs   map[string][]byte
	leases  map[string]map[string]bool
	creates int
}

func newFakeCtrd() *fakeCtrd {
	return &fakeCtrd{records: map[string]containerd.Record{}, blobs: map[string][]byte{}, leases: map[string]map[string]bool{}}
}

// blob stores b under a made-up digest and returns its descriptor.
func (f *fakeCtrd) blob(mediaType string, b []byte) containerd.Descriptor {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := fmt.Sprintf("sha256:%064x", len(f.blobs)+1)
	f.blobs[d] = b
	return containerd.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

// image stores an index with this platform's manifest (config with labels, one
// layer) and a manifest of another platform that is absent, as a pull leaves them.
func (f *fakeCtrd) image(t testing.TB, labels map[string]string) (target containerd.Descriptor, blobs []string) {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"config": map[string]any{"Labels": labels}})
	config := f.blob("application/vnd.oci.image.config.v1+json", cfg)
	layer := f.blob("application/vnd.oci.image.layer.v1.tar", []byte("layer "+config.Digest))
	man, _ := json.Marshal(map[string]any{"mediaType": mediaOCIManifest, "config": config, "layers": []containerd.Descriptor{layer}})
	manifest := f.blob(mediaOCIManifest, man)
	other := ociDescriptor{MediaType: mediaOCIManifest, Digest: "sha256:" + fmt.Sprintf("%064d", len(f.blobs)+100)}
	other.Platform = &struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	}{"plan9", "mips"}
	mine := ociDescriptor{MediaType: mediaOCIManifest, Digest: manifest.Digest, Size: manifest.Size}
	mine.Platform = &struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	}{runtime.GOOS, runtime.GOARCH}
	idx, _ := json.Marshal(map[string]any{"mediaType": mediaOCIIndex, "manifests": []ociDescriptor{other, mine}})
	index := f.blob(mediaOCIIndex, idx)
	return index, slices.Sorted(slices.Values([]string{index.Digest, manifest.Digest, config.Digest, layer.Digest}))
}

func (f *fakeCtrd) put(name string, target containerd.Descriptor, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[name] = containerd.Record{Name: name, Target: target, Labels: labels}
}

func (f *fakeCtrd) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.records, name)
}

func (f *fakeCtrd) record(name string) (containerd.Record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.records[name]
	return r, ok
}

func (f *fakeCtrd) leased() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.leases[DefaultLeaseID]))
}

func (f *fakeCtrd) Records(context.Context) ([]containerd.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []containerd.Record
	for _, n := range slices.Sorted(maps.Keys(f.records)) {
		r := f.records[n]
		r.Labels = maps.Clone(r.Labels)
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeCtrd) CreateRecord(_ context.Context, rec containerd.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.records[rec.Name]; ok {
		return errors.New("already exists")
	}
	f.records[rec.Name] = rec
	f.creates++
	return nil
}

func (f *fakeCtrd) SetLabels(_ context.Context, name string, _ containerd.Descriptor, set map[string]string, del []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.records[name]
	if !ok {
		return errors.New("not found")
	}
	r.Labels = maps.Clone(r.Labels)
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	maps.Copy(r.Labels, set)
	for _, k := range del {
		delete(r.Labels, k)
	}
	f.records[name] = r
	return nil
}

func (f *fakeCtrd) BlobSize(_ context.Context, d string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blobs[d]
	if !ok {
		return 0, containerd.ErrNoBlob
	}
	return int64(len(b)), nil
}

func (f *fakeCtrd) ReadBlob(_ context.Context, d string, _ int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blobs[d]
	if !ok {
		return nil, containerd.ErrNoBlob
	}
	return b, nil
}

func (f *fakeCtrd) EnsureLease(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leases[id] == nil {
		f.leases[id] = map[string]bool{}
	}
	return nil
}

func (f *fakeCtrd) LeasedContent(_ context.Context, id string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.leases[id])), nil
}

func (f *fakeCtrd) Lease(_ context.Context, id, d string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases[id][d] = true
	return nil
}

func (f *fakeCtrd) Release(_ context.Context, id, d string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.leases[id], d)
	return nil
}

func (f *fakeCtrd) DeleteLease(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.leases, id)
	return nil
}

func (f *fakeCtrd) ImageEvents(ctx context.Context, _ func(containerd.Event)) error {
	<-ctx.Done()
	return ctx.Err()
}

// labelSource is the containerd record-label source over the fake.
type labelSource struct{ f *fakeCtrd }

func (s labelSource) Name() string { return pin.SourceContainerd }

func (s labelSource) Snapshot(ctx context.Context) (pin.Matcher, error) {
	recs, _ := s.f.Records(ctx)
	m := containerd.RecordMatcher{}
	for _, r := range recs {
		if pin.RecordPinsByLabel(r.Name, r.Labels, false) {
			m[r.Target.Digest] = append(m[r.Target.Digest], r.Name)
		}
	}
	return m, nil
}

// newTestKeeper is a keeper over f whose pins are cfg plus f's record labels.
func newTestKeeper(t *testing.T, f *fakeCtrd, cfg pinner.Config, restore bool) *Keeper {
	t.Helper()
	p, _ := pinnertest.New(t, cfg, labelSource{f})
	return NewKeeper(f, p, nil, restore, false, DefaultLeaseID, logctx.Discard())
}

func reconcile(t *testing.T, k *Keeper) {
	t.Helper()
	assert.NilError(t, k.reconcile(context.Background()))
}

func TestStickyLeaseFollowsPins(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	b, _ := f.image(t, map[string]string{"k": "v"})
	c, cBlobs := f.image(t, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	f.put("docker.io/e2e/a:1", a, nil)
	f.put("docker.io/e2e/b:1", b, nil)
	f.put("docker.io/e2e/c:1", c, nil)
	cfg := pinnertest.EmptyConfig()
	cfg.ConfigLabels = true
	cfg.Patterns = []string{"e2e/a:1"}
	f.leases[DefaultLeaseID] = map[string]bool{"sha256:stale": true} // an earlier run's pin
	k := newTestKeeper(t, f, cfg, true)

	reconcile(t, k)
	want := slices.Sorted(slices.Values(append(slices.Clone(aBlobs), cBlobs...)))
	assert.DeepEqual(t, f.leased(), want) // the other platform's absent manifest is not leased; the stale one is released

	f.put("docker.io/e2e/b:1", b, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	reconcile(t, k)
	assert.Check(t, is.Len(f.leased(), 12), "a new pin adds its content")

	f.put("docker.io/e2e/b:1", b, nil)
	reconcile(t, k)
	assert.DeepEqual(t, f.leased(), want)
	st := k.Info()["state"].(stickyStatus)
	assert.Check(t, is.Equal(st.LeasedBlobs, 8))
	assert.Check(t, is.Equal(st.PinnedImages, 2))
}

func TestStickyRestoresDeletedRecord(t *testing.T) {
	for _, restore := range []bool{true, false} {
		t.Run(fmt.Sprint("restore=", restore), func(t *testing.T) {
			f := newFakeCtrd()
			a, aBlobs := f.image(t, nil)
			labels := map[string]string{"org.example/x": "y", pin.PinnedLabel: pin.PinnedValue}
			f.put("docker.io/e2e/a:1", a, labels)
			k := newTestKeeper(t, f, pinnertest.EmptyConfig(), restore)
			reconcile(t, k)

			f.remove("docker.io/e2e/a:1")
			k.onEvent(containerd.Event{Topic: containerd.TopicImageDelete, Name: "docker.io/e2e/a:1"})
			reconcile(t, k)
			rec, ok := f.record("docker.io/e2e/a:1")
			assert.Check(t, is.Equal(ok, restore))
			if !restore {
				reconcile(t, k)
				assert.Check(t, is.Len(f.leased(), 0), "an image deleted with restore off is released")
				return
			}
			assert.Check(t, is.DeepEqual(rec, containerd.Record{Name: "docker.io/e2e/a:1", Target: a, Labels: labels}))
			assert.Check(t, is.DeepEqual(f.leased(), aBlobs))
			st := k.Info()["state"].(stickyStatus)
			assert.Check(t, is.Equal(st.Restored, 1))
			assert.Check(t, st.LastRestoreIn != "", "the time from delete to restored is kept")
		})
	}
}

func TestStickyUnlabelThenDeleteStaysDeleted(t *testing.T) {
	f := newFakeCtrd()
	a, _ := f.image(t, nil)
	f.put("docker.io/e2e/a:1", a, map[string]string{pin.PinnedLabel: pin.PinnedValue})
	k := newTestKeeper(t, f, pinnertest.EmptyConfig(), true)
	reconcile(t, k)

	// Both events arrive before the next reconcile runs.
	f.put("docker.io/e2e/a:1", a, map[string]string{})
	k.onEvent(containerd.Event{Topic: containerd.TopicImageUpdate, Name: "docker.io/e2e/a:1", Labels: map[string]string{}})
	f.remove("docker.io/e2e/a:1")
	k.onEvent(containerd.Event{Topic: containerd.TopicImageDelete, Name: "docker.io/e2e/a:1"})
	reconcile(t, k)
	_, ok := f.record("docker.io/e2e/a:1")
	assert.Check(t, !ok, "an unpinned image stays deleted")
	assert.Check(t, is.Len(f.leased(), 0))
}

func TestStickyExtraTagNotRestored(t *testing.T) {
	f := newFakeCtrd()
	a, _ := f.image(t, nil)
	f.put("docker.io/e2e/a:1", a, nil)
	f.put("docker.io/e2e/a:extra", a, nil)
	cfg := pinnertest.EmptyConfig()
	cfg.Patterns = []string{"e2e/a:1"}
	k := newTestKeeper(t, f, cfg, true)
	reconcile(t, k)

	f.remove("docker.io/e2e/a:extra")
	reconcile(t, k)
	_, ok := f.record("docker.io/e2e/a:extra")
	assert.Check(t, !ok, "untagging a name that does not pin leaves the pinned image alone")

	f.remove("docker.io/e2e/a:1")
	reconcile(t, k)
	_, ok = f.record("docker.io/e2e/a:1")
	assert.Check(t, ok, "the pinned name comes back")
}

func TestStickyRestoresAfterRestart(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	f.put("docker.io/e2e/a:1", a, nil)
	cfg := pinnertest.EmptyConfig()
	cfg.Patterns = []string{"e2e/a:1"}
	cfg.StateDir = t.TempDir()
	reconcile(t, newTestKeeper(t, f, cfg, true))

	f.remove("docker.io/e2e/a:1") // while we are not running
	reconcile(t, newTestKeeper(t, f, cfg, true))
	_, ok := f.record("docker.io/e2e/a:1")
	assert.Check(t, ok, "the record deleted while we were down is restored from the saved records")
	assert.DeepEqual(t, f.leased(), aBlobs)

	cfg.Patterns = nil
	reconcile(t, newTestKeeper(t, f, cfg, true))
	assert.Check(t, is.Len(f.leased(), 0), "the sweep at start leases exactly the current pins")
}

func TestStickyPreloadLabels(t *testing.T) {
	f := newFakeCtrd()
	a, _ := f.image(t, nil)
	b, _ := f.image(t, nil)
	f.put("docker.io/e2e/pre-a:1", a, nil)
	f.put("docker.io/e2e/pre-b:1", b, map[string]string{pin.PinnedLabel: pin.PinnedValue}) // the operator's own pin
	cfg := pinnertest.EmptyConfig()
	cfg.Preloaded = []pinner.Preloaded{{Tarball: "a.tar", Refs: []string{"e2e/pre-a:1"}}, {Tarball: "b.tar", Refs: []string{"e2e/pre-b:1"}}}
	reconcile(t, newTestKeeper(t, f, cfg, true))
	ra, _ := f.record("docker.io/e2e/pre-a:1")
	assert.Check(t, is.DeepEqual(ra.Labels, map[string]string{pin.PinnedLabel: pin.PinnedValue, pin.PreloadArchiveLabel: "a.tar",
		pin.PreloadMarkerLabel: "true", pin.PreloadOwnerLabel: DefaultLeaseID}))
	rb, _ := f.record("docker.io/e2e/pre-b:1")
	assert.Check(t, is.DeepEqual(rb.Labels, map[string]string{pin.PinnedLabel: pin.PinnedValue, pin.PreloadArchiveLabel: "b.tar",
		pin.PreloadOwnerLabel: DefaultLeaseID}))

	cfg.Preloaded = nil // both archives removed from the directory
	k := newTestKeeper(t, f, cfg, true)
	rs, err := k.p.Decide(context.Background(), []pin.Image{{ID: a.Digest}, {ID: b.Digest}})
	assert.NilError(t, err)
	assert.Check(t, is.Len(rs[0], 0), "the pin label we mirrored does not pin once the archive is gone")
	assert.Check(t, is.Len(rs[1], 1), "the operator's own label pins")
	reconcile(t, k)
	reconcile(t, k)
	ra, _ = f.record("docker.io/e2e/pre-a:1")
	assert.Check(t, is.Len(ra.Labels, 0), "the labels we set go with the archive")
	rb, _ = f.record("docker.io/e2e/pre-b:1")
	assert.Check(t, is.DeepEqual(rb.Labels, map[string]string{pin.PinnedLabel: pin.PinnedValue}), "a pin we did not set stays")
	assert.Check(t, is.Len(f.leased(), 4), "only b's content stays leased")
}

// TestStickyLeasesKnownPinsWhilePreloadUnread: while preload files present at start
// are unread, what is known to be pinned is leased and restored at once, nothing is
// released or forgotten (an unread file may pin it); once they are read the lease
// follows the pins again, and the keeper is told.
func TestStickyLeasesKnownPinsWhilePreloadUnread(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	b, bBlobs := f.image(t, nil)
	f.put("docker.io/e2e/a:1", a, nil)
	f.put("docker.io/e2e/b:1", b, nil)
	f.leases[DefaultLeaseID] = map[string]bool{}
	for _, d := range bBlobs {
		f.leases[DefaultLeaseID][d] = true // b was pinned at the last run (by a preload file)
	}
	cfg := pinnertest.EmptyConfig()
	cfg.Patterns = []string{"e2e/a:1"}
	k := newTestKeeper(t, f, cfg, true)
	triggered := 0
	k.p.OnPreloadChange(func() { triggered++ })
	k.p.SetPreloadUnread([]string{"bundle.tar.zst"})

	reconcile(t, k)
	want := slices.Sorted(slices.Values(append(slices.Clone(aBlobs), bBlobs...)))
	assert.DeepEqual(t, f.leased(), want) // a's known pin added, b's content not released
	st := k.Info()["state"].(stickyStatus)
	assert.Check(t, is.DeepEqual(st.PreloadUnread, []string{"bundle.tar.zst"}))

	k.p.SetPreloadUnread(nil) // read: it did not pin b
	assert.Equal(t, triggered, 1)
	reconcile(t, k)
	assert.DeepEqual(t, f.leased(), slices.Sorted(slices.Values(aBlobs)))
	assert.Check(t, is.Len(k.Info()["state"].(stickyStatus).PreloadUnread, 0))
}

// TestStickyTwoInstancesOneEngine: two instances (two leases) on one engine, each
// with its own pins and preload archive: each lease holds its own pins only, neither
// releases the other's, and neither removes the preload labels the other set, however
// their reconciles interleave.
func TestStickyTwoInstancesOneEngine(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	b, bBlobs := f.image(t, nil)
	f.put("docker.io/e2e/a:1", a, nil)
	f.put("docker.io/e2e/b:1", b, nil)
	const leaseB = DefaultLeaseID + ".0123456789ab"
	cfgA, cfgB := pinnertest.EmptyConfig(), pinnertest.EmptyConfig()
	cfgA.Preloaded = []pinner.Preloaded{{Tarball: "a.tar", Refs: []string{"e2e/a:1"}}}
	cfgB.Preloaded = []pinner.Preloaded{{Tarball: "b.tar", Refs: []string{"e2e/b:1"}}}
	pa, _ := pinnertest.New(t, cfgA, labelSource{f})
	pb, _ := pinnertest.New(t, cfgB, labelSource{f})
	ka := NewKeeper(f, pa, nil, true, false, DefaultLeaseID, logctx.Discard())
	kb := NewKeeper(f, pb, nil, true, false, leaseB, logctx.Discard())
	for range 3 {
		reconcile(t, ka)
		reconcile(t, kb)
	}
	held := func(lease string) []string { return slices.Sorted(maps.Keys(f.leases[lease])) }
	assert.DeepEqual(t, held(DefaultLeaseID), slices.Sorted(slices.Values(aBlobs)))
	assert.DeepEqual(t, held(leaseB), slices.Sorted(slices.Values(bBlobs)))
	ra, _ := f.record("docker.io/e2e/a:1")
	rb, _ := f.record("docker.io/e2e/b:1")
	assert.Check(t, is.Equal(ra.Labels[pin.PreloadOwnerLabel], DefaultLeaseID))
	assert.Check(t, is.Equal(rb.Labels[pin.PreloadOwnerLabel], leaseB))
	assert.Check(t, is.Equal(rb.Labels[pin.PreloadArchiveLabel], "b.tar"), "A does not take b.tar's labels away")
}

func TestUnpinHint(t *testing.T) {
	h := pin.UnpinHint([]pin.Reason{{Source: pin.SourcePreload, Detail: "a.tar: e2e/x:1"}, {Source: pin.SourcePinsFile, Detail: "e2e/*"}})
	assert.Check(t, is.Contains(h, "remove the archive a.tar from the preload directory"))
	assert.Check(t, is.Contains(h, `remove "e2e/*" from the pins file and send SIGHUP`))
	assert.Check(t, is.Contains(h, "--restore-pinned-images=false"))
}

// BenchmarkStickyReconcile is one reconcile over 1,000 images, 100 of them pinned,
// with the content walks cached (as after the first).
func BenchmarkStickyReconcile(b *testing.B) {
	f := newFakeCtrd()
	cfg := pinnertest.EmptyConfig()
	for i := range 1000 {
		target, _ := f.image(b, nil)
		name := fmt.Sprintf("docker.io/e2e/bench-%d:1", i)
		f.put(name, target, nil)
		if i%10 == 0 {
			cfg.Patterns = append(cfg.Patterns, name)
		}
	}
	p, err := pinner.New(cfg, nil, labelSource{f})
	assert.NilError(b, err)
	k := NewKeeper(f, p, nil, true, false, DefaultLeaseID, logctx.Discard())
	ctx := context.Background()
	assert.NilError(b, k.reconcile(ctx))
	b.ResetTimer()
	for b.Loop() {
		if err := k.reconcile(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// archiveLoader loads an archive into the fake by putting back a record and its blobs.
type archiveLoader struct {
	f      *fakeCtrd
	rec    containerd.Record
	blobs  map[string][]byte
	loaded int
}

func (l *archiveLoader) LoadImages(context.Context, io.Reader) ([]string, error) {
	l.f.mu.Lock()
	maps.Copy(l.f.blobs, l.blobs)
	l.f.mu.Unlock()
	l.f.put(l.rec.Name, l.rec.Target, l.rec.Labels)
	l.loaded++
	return []string{"e2e/pre:1"}, nil
}

func TestStickyReloadsArchiveWhenContentIsGone(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "a.tar"), []byte("A"), 0o644))
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	f.put("docker.io/e2e/pre:1", a, nil)
	cfg := pinnertest.EmptyConfig()
	cfg.Preloaded = []pinner.Preloaded{{Tarball: "a.tar", Refs: []string{"e2e/pre:1"}}}
	k := newTestKeeper(t, f, cfg, true)
	l := &archiveLoader{f: f, rec: containerd.Record{Name: "docker.io/e2e/pre:1", Target: a}, blobs: map[string][]byte{}}
	for _, d := range aBlobs {
		l.blobs[d] = f.blobs[d]
	}
	k.reloadFile = dirReloader(l, dir, k.p)
	reconcile(t, k)

	// The record and its content go (the lease taken away, then a delete and GC).
	f.remove("docker.io/e2e/pre:1")
	f.mu.Lock()
	for _, d := range aBlobs {
		delete(f.blobs, d)
	}
	f.mu.Unlock()
	reconcile(t, k)
	assert.Check(t, is.Equal(l.loaded, 1), "the archive is loaded again")
	_, ok := f.record("docker.io/e2e/pre:1")
	assert.Check(t, ok)
	reconcile(t, k)
	assert.Check(t, is.DeepEqual(f.leased(), aBlobs))
}

func TestStickyDigestPatternPins(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	f.put("docker.io/e2e/dig:1", a, nil)
	cfg := pinnertest.EmptyConfig()
	cfg.Patterns = []string{"e2e/dig@" + a.Digest}
	reconcile(t, newTestKeeper(t, f, cfg, true))
	assert.Check(t, is.DeepEqual(f.leased(), aBlobs), "repo@digest patterns match the record's repository and target")
}

// listThenDelete is a store whose record listing is followed by the delete of one
// record: the record-label source, which lists on its own, no longer sees it.
type listThenDelete struct {
	*fakeCtrd
	k    *Keeper
	name string
}

func (s *listThenDelete) Records(ctx context.Context) ([]containerd.Record, error) {
	recs, err := s.fakeCtrd.Records(ctx)
	if s.name != "" {
		s.remove(s.name)
		s.k.onEvent(containerd.Event{Topic: containerd.TopicImageDelete, Name: s.name})
		s.name = ""
	}
	return recs, err
}

func TestStickyDeleteBetweenListingAndSnapshot(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	labels := map[string]string{pin.PinnedLabel: pin.PinnedValue}
	f.put("docker.io/e2e/a:1", a, labels)
	p, _ := pinnertest.New(t, pinnertest.EmptyConfig(), labelSource{f})
	st := &listThenDelete{fakeCtrd: f}
	k := NewKeeper(st, p, nil, true, false, DefaultLeaseID, logctx.Discard())
	st.k = k
	reconcile(t, k)
	assert.Check(t, is.DeepEqual(f.leased(), aBlobs))

	st.name = "docker.io/e2e/a:1" // deleted right after the next listing
	reconcile(t, k)
	assert.Check(t, is.DeepEqual(f.leased(), aBlobs), "the content of a record the listing shows pinned stays leased")
	reconcile(t, k) // the one its delete event triggers
	rec, ok := f.record("docker.io/e2e/a:1")
	assert.Assert(t, ok, "the record is restored")
	assert.Check(t, is.DeepEqual(rec.Labels, labels))
	assert.Check(t, is.DeepEqual(f.leased(), aBlobs))
}

// An image whose content cannot be read (its index does not decode) is skipped and
// reported; the others are still leased, and nothing is released while it is bad (it
// aborted the whole reconcile: nothing new leased, nothing restored).
func TestStickyUnreadableImageIsSkipped(t *testing.T) {
	f := newFakeCtrd()
	a, aBlobs := f.image(t, nil)
	bad, _ := f.image(t, nil)
	f.put("docker.io/e2e/bad:1", bad, nil)
	cfg := pinnertest.EmptyConfig()
	cfg.Patterns = []string{"e2e/a:1", "e2e/bad:1"}
	f.leases[DefaultLeaseID] = map[string]bool{"sha256:earlier": true} // held from before: not released while bad
	f.mu.Lock()
	good := slices.Clone(f.blobs[bad.Digest])
	f.blobs[bad.Digest] = []byte("{not json")
	f.mu.Unlock()
	k := newTestKeeper(t, f, cfg, true)
	reconcile(t, k)
	f.put("docker.io/e2e/a:1", a, nil) // pinned after the first reconcile: leased at the next
	reconcile(t, k)
	assert.DeepEqual(t, f.leased(), slices.Sorted(slices.Values(append(slices.Clone(aBlobs), "sha256:earlier"))))
	st := k.Info()["state"].(stickyStatus)
	assert.Check(t, is.Len(st.Unreadable, 1))
	assert.Check(t, is.Contains(st.Unreadable[0], "docker.io/e2e/bad:1"))

	f.mu.Lock()
	f.blobs[bad.Digest] = good // readable again: leased, and what no pin holds released
	f.mu.Unlock()
	reconcile(t, k)
	assert.Check(t, is.Len(f.leased(), 8))
	assert.Check(t, !slices.Contains(f.leased(), "sha256:earlier"))
	assert.Check(t, is.Len(k.Info()["state"].(stickyStatus).Unreadable, 0))
}
