package preload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/internal/pinnertest"
	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// preloadEngine is a stateful engine for the preload directory: archives it can load
// (by content), the images it has, a registry it pulls from that can be down, and a
// count of loads and pulls.
type preloadEngine struct {
	mu       sync.Mutex
	archives map[string][]string // content -> references loaded
	images   map[string]bool     // references the engine has (as resolved)
	registry map[string]bool     // references the registry serves
	down     bool
	loads    []string // contents loaded, in order
	pulls    int
	block    chan struct{} // when set, a load waits for it to be closed
	failLoad []error       // the next loads fail with these, one each
}

func newPreloadEngine() *preloadEngine {
	return &preloadEngine{archives: map[string][]string{}, images: map[string]bool{}, registry: map[string]bool{}}
}

func (e *preloadEngine) LoadImages(ctx context.Context, archive io.Reader) ([]string, error) {
	b, err := io.ReadAll(archive)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	block := e.block
	e.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.failLoad) > 0 {
		err := e.failLoad[0]
		e.failLoad = e.failLoad[1:]
		return nil, err
	}
	refs, ok := e.archives[string(b)]
	if !ok {
		return nil, errors.New("load images: invalid archive")
	}
	e.loads = append(e.loads, string(b))
	for _, r := range refs {
		e.images[imageref.Key(r)] = true
	}
	return refs, nil
}

func (e *preloadEngine) HasImage(_ context.Context, ref string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.images[imageref.Key(ref)], nil
}

func (e *preloadEngine) PullImage(_ context.Context, ref string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pulls++
	switch {
	case e.down:
		return errors.New("registry unreachable")
	case !e.registry[imageref.Key(ref)]:
		return errors.New("manifest unknown")
	}
	e.images[imageref.Key(ref)] = true
	return nil
}

func (e *preloadEngine) remove(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.images, imageref.Key(ref))
}

func (e *preloadEngine) setDown(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = down
}

func (e *preloadEngine) loaded() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.loads)
}

// testDir is a preload directory driven by hand: scans and loads run when the test
// says, on a fake clock.
type testDir struct {
	*Dir
	p     *pinner.Pinner
	clock *pintest.FakeClock
	hook  *logtest.Hook
}

// newTestDir starts a preload directory over dir with its state in stateDir, without
// the background watcher and loader (the test calls scan and processNext).
func newTestDir(t testing.TB, dir, stateDir string, engine Loader) *testDir {
	t.Helper()
	cfg := pinnertest.EmptyConfig()
	cfg.StateDir = stateDir
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := pinner.NewWatched(cfg, log)
	assert.NilError(t, err)
	d := New(dir, engine, p, p.StateStore(), time.Hour, log)
	clock := pintest.NewFakeClock()
	d.now = clock.Now
	d.retry = pullBackoff{initial: time.Millisecond, max: time.Millisecond}
	t.Cleanup(d.Close)
	d.loadSaved()
	d.scan()
	return &testDir{Dir: d, p: p, clock: clock, hook: hook}
}

// settle lets the files settle and processes every queued archive.
func (d *testDir) settleAndLoad() {
	d.scan()
	d.clock.Advance(d.settle)
	d.scan()
	for d.processNext() {
	}
}

func (d *testDir) view(t testing.TB, name string) pinner.Preloaded {
	t.Helper()
	for _, v := range d.p.PreloadedNow() {
		if v.Tarball == name {
			return v
		}
	}
	t.Fatalf("no preload file %s in %+v", name, d.p.PreloadedNow())
	return pinner.Preloaded{}
}

// preloadPins returns the preload reasons of images named by refs.
func (d *testDir) preloadPins(t *testing.T, refs ...string) []string {
	t.Helper()
	var imgs []pin.Image
	for _, r := range refs {
		imgs = append(imgs, pin.Image{ID: pintest.DigA, RepoTags: []string{r}})
	}
	var out []string
	for _, rs := range pintest.MustEvaluate(t, d.p, t.Context(), imgs) {
		for _, r := range rs {
			if r.Source == pin.SourcePreload {
				out = append(out, r.Detail)
			}
		}
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	assert.NilError(t, os.WriteFile(path, []byte(content), 0o644))
}

func TestPreloadDirLoadsAndPins(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	writeFile(t, filepath.Join(dir, "b.tar.gz"), "archive-b")
	writeFile(t, filepath.Join(dir, "broken.tar"), "not an archive")
	for _, ignored := range []string{".hidden.tar", "c.tar.partial", "c.tar.tmp", "notes.md"} {
		writeFile(t, filepath.Join(dir, ignored), "archive-a")
	}
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "sub.tar"), 0o755))
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1", "a:2"}
	engine.archives["archive-b"] = []string{pintest.DigB} // untagged: the engine names its ID

	d := newTestDir(t, dir, t.TempDir(), engine)
	assert.Check(t, is.Len(engine.loaded(), 0), "nothing is loaded before the files settled")
	assert.Equal(t, d.view(t, "a.tar").State, pinner.PreloadPending)
	d.settleAndLoad()

	assert.DeepEqual(t, engine.loaded(), []string{"archive-a", "archive-b"})
	a := d.view(t, "a.tar")
	assert.Check(t, a.State == pinner.PreloadLoaded && a.Origin == pinner.OriginLoaded && !a.Skipped && a.Digest != "", "%+v", a)
	assert.DeepEqual(t, a.Refs, []string{"a:1", "a:2"})
	broken := d.view(t, "broken.tar")
	assert.Check(t, broken.State == pinner.PreloadFailed && broken.Failed != "" && broken.Refs == nil, "%+v", broken)
	assert.Check(t, is.Len(d.p.PreloadedNow(), 3), "ignored names are not preload files")
	assert.DeepEqual(t, d.preloadPins(t, "a:1", "a:3"), []string{"a.tar: a:1"})
	reasons := pintest.EvaluateOne(t, d.p, pin.Image{ID: pintest.DigB})
	assert.DeepEqual(t, reasons, []pin.Reason{{Source: pin.SourcePreload, Detail: "b.tar.gz: " + pintest.DigB}})
}

// TestPreloadDirIncompleteFile: a file still changing is not processed; it is once it
// stayed the same for the settle time.
func TestPreloadDirIncompleteFile(t *testing.T) {
	dir := t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	d := newTestDir(t, dir, t.TempDir(), engine)
	path := filepath.Join(dir, "a.tar")
	writeFile(t, path, "archive")
	d.scan()
	d.clock.Advance(d.settle / 2)
	writeFile(t, path, "archive-a") // still being written
	d.scan()
	d.clock.Advance(d.settle / 2)
	d.scan()
	for d.processNext() {
	}
	assert.Check(t, is.Len(engine.loaded(), 0), "changed within the settle time: not loaded yet")
	d.clock.Advance(d.settle)
	d.scan()
	for d.processNext() {
	}
	assert.DeepEqual(t, engine.loaded(), []string{"archive-a"})
}

// TestPreloadDirLoadsLz4: k3s takes .tar.lz4 bundles, the engine does not read lz4:
// the engine is given the decompressed stream, and the digest recorded is the file's.
func TestPreloadDirLoadsLz4(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bundle.tar.lz4")
	assert.NilError(t, os.WriteFile(path, compress(t, "lz4", []byte("archive-lz4")), 0o600))
	engine := newPreloadEngine()
	engine.archives["archive-lz4"] = []string{"lz4:1"}
	d := newTestDir(t, dir, t.TempDir(), engine)
	d.settleAndLoad()
	assert.DeepEqual(t, engine.loaded(), []string{"archive-lz4"})
	want, err := fileDigest(path)
	assert.NilError(t, err)
	v := d.view(t, "bundle.tar.lz4")
	assert.Check(t, is.Equal(v.Digest, want))
	assert.DeepEqual(t, v.Refs, []string{"lz4:1"})
}

// TestPreloadDirSettlesOnModificationTime: a file last written longer than the settle
// time ago is complete at first sight (a start does not wait a settle time for
// bundles copied in long before), one written just now is not.
func TestPreloadDirSettlesOnModificationTime(t *testing.T) {
	dir := t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-old"] = []string{"old:1"}
	engine.archives["archive-new"] = []string{"new:1"}
	writeFile(t, filepath.Join(dir, "old.tar"), "archive-old")
	writeFile(t, filepath.Join(dir, "new.tar"), "archive-new")
	clock := pintest.NewFakeClock()
	assert.NilError(t, os.Chtimes(filepath.Join(dir, "old.tar"), clock.Now(), clock.Now().Add(-time.Hour)))
	assert.NilError(t, os.Chtimes(filepath.Join(dir, "new.tar"), clock.Now(), clock.Now()))
	d := newTestDir(t, dir, t.TempDir(), engine)
	for d.processNext() {
	}
	assert.DeepEqual(t, engine.loaded(), []string{"archive-old"})
	d.settleAndLoad()
	assert.DeepEqual(t, engine.loaded(), []string{"archive-old", "archive-new"})
}

// TestPreloadDirRestartSkipsLoadedArchives: at a restart an archive with the recorded
// content digest is not loaded again while the engine has its images; touched but
// unchanged it is not either; changed, or its images deleted, it is.
func TestPreloadDirRestartSkipsLoadedArchives(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	engine.archives["archive-b"] = []string{"b:1"}
	engine.archives["archive-b2"] = []string{"b:2"}
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	writeFile(t, filepath.Join(dir, "b.tar"), "archive-b")
	d := newTestDir(t, dir, state, engine)
	d.settleAndLoad()
	assert.Check(t, is.Len(engine.loaded(), 2))
	d.Close()

	restart := func() *testDir {
		d := newTestDir(t, dir, state, engine)
		for d.processNext() { // the recorded versions are processed at once, no settle time
		}
		return d
	}
	d = restart()
	assert.Check(t, is.Len(engine.loaded(), 2), "nothing loaded again")
	assert.Check(t, d.view(t, "a.tar").Skipped && d.view(t, "a.tar").State == pinner.PreloadLoaded)
	assert.Equal(t, d.Info()["skippedThisStart"], 2)
	assert.DeepEqual(t, d.preloadPins(t, "a:1", "b:1"), []string{"a.tar: a:1", "b.tar: b:1"})
	d.Close()

	// a.tar touched (same content, new mtime), b.tar replaced, a:1 still there.
	later := time.Now().Add(time.Hour)
	assert.NilError(t, os.Chtimes(filepath.Join(dir, "a.tar"), later, later))
	writeFile(t, filepath.Join(dir, "b.tar"), "archive-b2")
	d = newTestDir(t, dir, state, engine)
	// While pending, the pins of the last good loads apply.
	assert.DeepEqual(t, d.preloadPins(t, "a:1", "b:1"), []string{"a.tar: a:1", "b.tar: b:1"})
	d.settleAndLoad()
	assert.DeepEqual(t, engine.loaded(), []string{"archive-a", "archive-b", "archive-b2"})
	assert.Check(t, d.view(t, "a.tar").Skipped)
	assert.DeepEqual(t, d.preloadPins(t, "b:1", "b:2"), []string{"b.tar: b:2"})
	d.Close()

	engine.remove("a:1") // deleted behind our back: loaded again
	d = restart()
	assert.DeepEqual(t, engine.loaded(), []string{"archive-a", "archive-b", "archive-b2", "archive-a"})
	assert.Check(t, !d.view(t, "a.tar").Skipped)
}

// TestPreloadDirRemovedFileUnpins: a file removed while running is unpinned, and the
// saved state no longer holds it.
func TestPreloadDirRemovedFileUnpins(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	d := newTestDir(t, dir, state, engine)
	d.settleAndLoad()
	assert.DeepEqual(t, d.preloadPins(t, "a:1"), []string{"a.tar: a:1"})
	assert.NilError(t, os.Remove(filepath.Join(dir, "a.tar")))
	d.scan()
	assert.Check(t, is.Len(d.preloadPins(t, "a:1"), 0))
	var saved []preloadRecord
	_, err := statefile.Store{Dir: state}.Load(pinner.PreloadStateName, &saved)
	assert.NilError(t, err)
	assert.Check(t, is.Len(saved, 0))
}

// TestPreloadDirFailedLoadsKeepPins: an archive the engine cannot load pins what its
// manifest names; one that cannot even be read pins what it loaded last; one that
// never loaded pins nothing. A directory that cannot be read keeps the saved pins.
func TestPreloadDirFailedLoadsKeepPins(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeTar(t, filepath.Join(dir, "docker-save.tar.gz"), "gzip", map[string]string{
		"manifest.json": `[{"Config":"c.json","RepoTags":["app:1","registry.local/app:1"],"Layers":[]}]`,
	})
	writeTar(t, filepath.Join(dir, "oci.tar"), "", map[string]string{
		"index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"docker.io/library/db:2"}},` +
			`{"annotations":{"org.opencontainers.image.ref.name":"latest"}}]}`,
	})
	writeFile(t, filepath.Join(dir, "db.tar"), "archive-db")
	engine := newPreloadEngine()
	engine.archives["archive-db"] = []string{"db:3"}
	d := newTestDir(t, dir, state, engine)
	d.settleAndLoad()
	const failed = "load images: invalid archive"
	ds := d.view(t, "docker-save.tar.gz")
	assert.Check(t, ds.State == pinner.PreloadFailed && ds.Failed == failed && ds.Origin == pinner.OriginManifest, "%+v", ds)
	assert.DeepEqual(t, ds.Refs, []string{"app:1", "registry.local/app:1"})
	assert.DeepEqual(t, d.view(t, "oci.tar").Refs, []string{"docker.io/library/db:2"})
	d.Close()

	// Next start: db.tar is damaged (neither loads nor reads): it keeps its pins.
	writeFile(t, filepath.Join(dir, "db.tar"), "damaged")
	d = newTestDir(t, dir, state, engine)
	d.settleAndLoad()
	db := d.view(t, "db.tar")
	assert.Check(t, db.State == pinner.PreloadFailed && db.Origin == pinner.OriginSaved, "%+v", db)
	assert.DeepEqual(t, d.preloadPins(t, "db:3"), []string{"db.tar: db:3"})
	d.Close()

	// The directory cannot be read at the next start: the saved pins stay.
	assert.NilError(t, os.Rename(dir, dir+".away"))
	d = newTestDir(t, dir, state, engine)
	assert.DeepEqual(t, d.preloadPins(t, "db:3", "app:1"), []string{"db.tar: db:3", "docker-save.tar.gz: app:1"})
	assert.Check(t, d.Info()["readError"] != "")
}

// TestPreloadList: a list pins what it names from the moment it is read, pulls what
// the engine lacks, retries while the registry is down, and skips bad lines.
func TestPreloadList(t *testing.T) {
	dir := t.TempDir()
	engine := newPreloadEngine()
	engine.images[imageref.Key("present:1")] = true
	engine.registry[imageref.Key("registry.local/app:1")] = true
	engine.registry[imageref.Key("registry.local/db")] = true
	engine.setDown(true)
	writeFile(t, filepath.Join(dir, "images.txt"), "# air-gap images\n\npresent:1\nregistry.local/app:1  # the app\nregistry.local/db\nNot A Ref\nwild*\n")
	d := newTestDir(t, dir, t.TempDir(), engine)
	d.settleAndLoad()
	assert.DeepEqual(t, d.preloadPins(t, "present:1", "registry.local/app:1", "registry.local/db:latest"),
		[]string{"images.txt: present:1", "images.txt: registry.local/app:1", "images.txt: registry.local/db"})
	v := d.view(t, "images.txt")
	assert.Check(t, is.Contains(v.Failed, `line 6: invalid image reference "Not A Ref"`))
	assert.Check(t, is.Contains(v.Failed, `line 7: invalid image reference "wild*"`))

	poll.WaitOn(t, func(poll.LogT) poll.Result {
		v := d.view(t, "images.txt")
		if v.Images["registry.local/app:1"] != "failed: registry unreachable" {
			return poll.Continue("not failed yet: %v", v.Images)
		}
		return poll.Success()
	})
	assert.Equal(t, d.view(t, "images.txt").State, pinner.PreloadPending)
	assert.Equal(t, d.view(t, "images.txt").Images["present:1"], listPresent)
	engine.setDown(false) // the registry comes up: the retries pull
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if v := d.view(t, "images.txt"); v.State != pinner.PreloadLoaded {
			return poll.Continue("not loaded yet: %+v", v)
		}
		return poll.Success()
	})
	ok, _ := engine.HasImage(t.Context(), "registry.local/db:latest")
	assert.Check(t, ok)

	// The list is edited: a name dropped is unpinned.
	writeFile(t, filepath.Join(dir, "images.txt"), "registry.local/app:1\n")
	d.settleAndLoad()
	assert.DeepEqual(t, d.preloadPins(t, "present:1", "registry.local/app:1"), []string{"images.txt: registry.local/app:1"})
}

// TestWaitPreloaded: ImageStatus's wait returns once the pending archive naming the
// image is processed; it does not wait for an image no pending file provides.
func TestWaitPreloaded(t *testing.T) {
	dir := t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	d := newTestDir(t, dir, t.TempDir(), engine)
	assert.Check(t, !d.WaitFor(t.Context(), "a:1"), "nothing pending")
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	d.scan()
	waited := make(chan bool)
	go func() { waited <- d.WaitFor(t.Context(), "docker.io/library/a:1") }()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if d.Info()["imageStatusWaiting"] != 1 {
			return poll.Continue("not waiting yet")
		}
		return poll.Success()
	})
	d.clock.Advance(d.settle)
	d.scan()
	for d.processNext() {
	}
	assert.Check(t, <-waited, "it waited for the archive whose content was not known yet")
	ok, _ := engine.HasImage(t.Context(), "a:1")
	assert.Check(t, ok)
	assert.Check(t, !d.WaitFor(t.Context(), "a:1"), "loaded: no wait")

	d.wait = 0
	writeFile(t, filepath.Join(dir, "b.tar"), "archive-b")
	d.scan()
	assert.Check(t, !d.WaitFor(t.Context(), "b:1"), "waiting turned off")
}

// TestReloadArchiveFor: the archive that provides a deleted image is loaded again.
func TestReloadArchiveFor(t *testing.T) {
	dir := t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	d := newTestDir(t, dir, t.TempDir(), engine)
	d.settleAndLoad()
	engine.remove("a:1")
	name, err := d.ReloadFor(t.Context(), "docker.io/library/a:1")
	assert.NilError(t, err)
	assert.Equal(t, name, "a.tar")
	ok, _ := engine.HasImage(t.Context(), "a:1")
	assert.Check(t, ok)
	assert.Check(t, is.Len(engine.loaded(), 2))
	_, err = d.ReloadFor(t.Context(), "other:1")
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
	assert.Equal(t, d.p.PreloadedNow()[0].Tarball, "a.tar")
}

// TestPreloadDirNeverFailsOpenAtFirstStart: an archive in the directory at start that
// was never processed before may hold images the engine already has: until its
// content is known, Evaluate and Check pin every image (a preload-unread reason that
// names the file) rather than list one of them unpinned, and Decide (the keepers')
// says only what is known. A file added later pins nothing it does not hold; nor
// does one whose pins were saved at an earlier start.
func TestPreloadDirNeverFailsOpenAtFirstStart(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeTar(t, filepath.Join(dir, "app.tar"), "", map[string]string{
		"manifest.json": `[{"Config":"c.json","RepoTags":["app:1"],"Layers":[]}]`,
	})
	engine := newPreloadEngine()
	d := newTestDir(t, dir, state, engine)
	imgs := []pin.Image{{ID: pintest.DigA, RepoTags: []string{"app:1"}}, {ID: pintest.DigB, RepoTags: []string{"other:1"}}}
	unread := pin.Reason{Source: pin.SourcePreloadUnread, Detail: "preload files present at start are not read yet: app.tar"}
	got := pintest.MustEvaluate(t, d.p, t.Context(), imgs)
	assert.DeepEqual(t, got, [][]pin.Reason{{unread}, {unread}})
	assert.DeepEqual(t, d.p.Check(t.Context(), imgs[1]), []pin.Reason{unread})
	known, err := d.p.Decide(t.Context(), imgs)
	assert.NilError(t, err)
	assert.DeepEqual(t, known, [][]pin.Reason{nil, nil})
	assert.DeepEqual(t, d.p.PreloadUnread(), []string{"app.tar"})

	d.settleAndLoad() // its manifest is read (the engine cannot load it)
	assert.DeepEqual(t, d.preloadPins(t, "app:1"), []string{"app.tar: app:1"})
	assert.Check(t, is.Len(d.p.PreloadUnread(), 0))
	got = pintest.MustEvaluate(t, d.p, t.Context(), imgs)
	assert.DeepEqual(t, got, [][]pin.Reason{{{Source: pin.SourcePreload, Detail: "app.tar: app:1"}}, nil})

	writeFile(t, filepath.Join(dir, "later.tar"), "archive-later")
	d.scan()
	got = pintest.MustEvaluate(t, d.p, t.Context(), imgs)
	assert.Check(t, got[1] == nil, "a file added while running pins only what it holds: %v", got[1])
	d.Close()

	// Next start: app.tar changed and unreadable; its saved pins answer, nothing else is pinned.
	assert.NilError(t, os.Remove(filepath.Join(dir, "later.tar")))
	writeFile(t, filepath.Join(dir, "app.tar"), "changed, unreadable")
	d = newTestDir(t, dir, state, engine)
	assert.DeepEqual(t, d.preloadPins(t, "app:1"), []string{"app.tar: app:1"})
	got = pintest.MustEvaluate(t, d.p, t.Context(), imgs)
	assert.Check(t, got[1] == nil, "%v", got[1])
}

// TestPreloadDirReadsUnreadFilesTogether: at a first start the manifests of all the
// archives present are read before the first load, so that the unread state lasts as
// long as the slowest read, not as long as the loads.
func TestPreloadDirReadsUnreadFilesTogether(t *testing.T) {
	dir := t.TempDir()
	clock := pintest.NewFakeClock()
	for i, c := range []string{"", "gzip", "xz", "zstd", "lz4"} {
		name := fmt.Sprintf("bundle%d.tar", i)
		writeTar(t, filepath.Join(dir, name), c, map[string]string{
			"manifest.json": fmt.Sprintf(`[{"Config":"c.json","RepoTags":["app%d:1"],"Layers":[]}]`, i),
		})
		assert.NilError(t, os.Chtimes(filepath.Join(dir, name), clock.Now(), clock.Now().Add(-time.Hour)))
	}
	engine := newPreloadEngine()
	engine.block = make(chan struct{}) // loads wait until closed
	d := newTestDir(t, dir, t.TempDir(), engine)
	assert.Check(t, is.Len(d.p.PreloadUnread(), 5))
	done := make(chan struct{})
	go func() { defer close(done); d.processNext() }() // reads every manifest, then blocks in the first load
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := len(d.p.PreloadUnread()); n > 0 {
			return poll.Continue("%d files unread", n)
		}
		return poll.Success()
	})
	assert.DeepEqual(t, d.preloadPins(t, "app0:1", "app4:1"), []string{"bundle0.tar: app0:1", "bundle4.tar: app4:1"})
	close(engine.block)
	<-done
}

// TestPreloadWatcher: through Start's own watcher (inotify) and loader, an archive
// added while running is loaded and pinned, a list added is pulled, and removing
// them unpins.
func TestPreloadWatcher(t *testing.T) {
	dir := t.TempDir()
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	engine.registry[imageref.Key("listed:1")] = true
	cfg := pinnertest.EmptyConfig()
	cfg.StateDir = t.TempDir()
	p, err := pinner.NewWatched(cfg, logctx.Discard())
	assert.NilError(t, err)
	s := New(dir, engine, p, p.StateStore(), DefaultWait, logctx.Discard())
	s.Start()
	defer s.Close()
	waitRecords := func(want map[string]string) {
		t.Helper()
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			got := map[string]string{}
			for _, r := range p.PreloadedNow() {
				got[r.Tarball] = r.State
			}
			if len(got) != len(want) {
				return poll.Continue("records %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					return poll.Continue("records %v, want %v", got, want)
				}
			}
			return poll.Success()
		})
	}
	pinnedBy := func(ref string) []pin.Reason {
		rs, err := p.Evaluate(t.Context(), []pin.Image{{ID: pintest.DigA, RepoTags: []string{ref}}})
		assert.NilError(t, err)
		return rs[0]
	}

	writeFile(t, filepath.Join(dir, ".a.tar.partial"), "archive-a")
	assert.NilError(t, os.Rename(filepath.Join(dir, ".a.tar.partial"), filepath.Join(dir, "a.tar")))
	writeFile(t, filepath.Join(dir, "images.txt"), "listed:1\n")
	waitRecords(map[string]string{"a.tar": pinner.PreloadLoaded, "images.txt": pinner.PreloadLoaded})
	assert.DeepEqual(t, pinnedBy("a:1"), []pin.Reason{{Source: pin.SourcePreload, Detail: "a.tar: a:1"}})
	assert.DeepEqual(t, pinnedBy("listed:1"), []pin.Reason{{Source: pin.SourcePreload, Detail: "images.txt: listed:1"}})
	assert.Equal(t, s.Info()["watching"], "inotify")

	assert.NilError(t, os.Remove(filepath.Join(dir, "a.tar")))
	assert.NilError(t, os.Remove(filepath.Join(dir, "images.txt")))
	waitRecords(map[string]string{})
	assert.Check(t, is.Len(pinnedBy("a:1"), 0))
	assert.Check(t, is.Len(pinnedBy("listed:1"), 0))
}
