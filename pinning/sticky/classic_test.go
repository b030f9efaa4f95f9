package sticky

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/internal/pinnertest"
	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// fakeClassic is an engine with the classic image store: images, and archives that
// load images (by content).
type fakeClassic struct {
	mu       sync.Mutex
	images   map[string]pin.Image
	archives map[string][]pin.Image
	loads    int
}

func (f *fakeClassic) put(img pin.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[img.ID] = img
}

func (f *fakeClassic) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.images, id)
}

func (f *fakeClassic) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.images[id]
	return ok
}

func (f *fakeClassic) Images(context.Context) ([]pin.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.images)), nil
}

func (f *fakeClassic) WatchImageRemovals(ctx context.Context, _ func(time.Time)) error {
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeClassic) LoadImages(_ context.Context, r io.Reader) ([]string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	var refs []string
	for _, img := range f.archives[string(b)] {
		f.images[img.ID] = img
		refs = append(refs, img.RepoTags...)
	}
	return refs, nil
}

func TestStickyClassicReloadsPreloadedAndReportsOthers(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "a.tar"), []byte("A"), 0o644))
	pre := pin.Image{ID: pintest.DigA, RepoTags: []string{"e2e/pre:1"}}
	pat := pin.Image{ID: pintest.DigB, RepoTags: []string{"e2e/pat:1", "e2e/pat:extra"}}
	f := &fakeClassic{images: map[string]pin.Image{}, archives: map[string][]pin.Image{"A": {pre}}}
	f.put(pre)
	f.put(pat)
	f.put(pin.Image{ID: pintest.DigC, RepoTags: []string{"e2e/other:1"}})
	cfg := pinnertest.EmptyConfig()
	cfg.Patterns = []string{"e2e/pat:1"}
	cfg.Preloaded = []pinner.Preloaded{{Tarball: "a.tar", Refs: []string{"e2e/pre:1"}}}
	cfg.StateDir = t.TempDir()
	p, _ := pinnertest.New(t, cfg)
	k := NewClassicKeeper(f, dirReloader(f, dir, p), p, true, logctx.Discard())
	ctx := context.Background()
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Equal(k.status.PinnedImages, 2))

	pat.RepoTags = []string{"e2e/pat:1"} // an untag of a name that does not pin
	f.put(pat)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Len(k.status.Lost, 0))

	f.remove(pintest.DigA)
	f.remove(pintest.DigB)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, f.has(pintest.DigA), "the preloaded image is loaded again from its archive")
	assert.Check(t, is.Equal(k.status.Reloaded, 1))
	assert.Check(t, is.Len(k.status.Lost, 1))
	assert.Check(t, is.Equal(k.status.Lost[0].ID, pintest.DigB))
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Len(k.status.Lost, 1), "a loss is reported once")

	// After a restart, an image deleted meanwhile is noticed from the saved state.
	f.remove(pintest.DigA)
	k = NewClassicKeeper(f, dirReloader(f, dir, p), p, true, logctx.Discard())
	assert.NilError(t, k.check(ctx))
	assert.Check(t, f.has(pintest.DigA))
	assert.Check(t, is.Equal(f.loads, 2))

	// Restore off: nothing is loaded.
	f.remove(pintest.DigA)
	k = NewClassicKeeper(f, dirReloader(f, dir, p), p, false, logctx.Discard())
	assert.NilError(t, k.check(ctx))
	assert.Check(t, !f.has(pintest.DigA))
}

// TestStickyClassicKeepsRememberedWhilePreloadUnread: an image pinned at the last
// run is not forgotten while preload files present at start are unread (one may pin
// it), and is once they are read and do not.
func TestStickyClassicKeepsRememberedWhilePreloadUnread(t *testing.T) {
	pre := pin.Image{ID: pintest.DigA, RepoTags: []string{"e2e/pre:1"}}
	f := &fakeClassic{images: map[string]pin.Image{}}
	f.put(pre)
	cfg := pinnertest.EmptyConfig()
	cfg.Preloaded = []pinner.Preloaded{{Tarball: "a.tar", Refs: []string{"e2e/pre:1"}}}
	cfg.StateDir = t.TempDir()
	p, _ := pinnertest.New(t, cfg)
	ctx := context.Background()
	assert.NilError(t, NewClassicKeeper(f, nil, p, true, logctx.Discard()).check(ctx))

	// Next start: the archive is not known yet (nothing saved of it in the pinner).
	cfg.Preloaded = nil
	p, _ = pinnertest.New(t, cfg)
	p.SetPreloadUnread([]string{"a.tar"})
	k := NewClassicKeeper(f, nil, p, true, logctx.Discard())
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Equal(k.status.PinnedImages, 1), "remembered while unread")
	p.SetPreloadUnread(nil)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Equal(k.status.PinnedImages, 0), "forgotten once read")
}

// loader is the engine part a dirReloader loads through.
type loader interface {
	LoadImages(ctx context.Context, archive io.Reader) ([]string, error)
}

// dirReloader stands in for Setup.ReloadArchiveFor: it loads the archive of dir that
// p's preload pins say provides ref.
func dirReloader(l loader, dir string, p *pinner.Pinner) Reloader {
	return func(ctx context.Context, ref string) (string, error) {
		for _, f := range p.PreloadedNow() {
			if slices.ContainsFunc(f.Refs, func(r string) bool { return imageref.Key(r) == imageref.Key(ref) }) {
				file, err := os.Open(filepath.Join(dir, f.Tarball))
				if err != nil {
					return f.Tarball, err
				}
				defer file.Close()
				_, err = l.LoadImages(ctx, file)
				return f.Tarball, err
			}
		}
		return "", fmt.Errorf("no preload file provides %s: %w", ref, cerrdefs.ErrNotFound)
	}
}
