package pinning

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
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// fakeClassic is an engine with the classic image store: images, and archives that
// load images (by content).
type fakeClassic struct {
	mu       sync.Mutex
	images   map[string]Image
	archives map[string][]Image
	loads    int
}

func (f *fakeClassic) put(img Image) {
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

func (f *fakeClassic) Images(context.Context) ([]Image, error) {
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
	pre := Image{ID: digA, RepoTags: []string{"e2e/pre:1"}}
	pat := Image{ID: digB, RepoTags: []string{"e2e/pat:1", "e2e/pat:extra"}}
	f := &fakeClassic{images: map[string]Image{}, archives: map[string][]Image{"A": {pre}}}
	f.put(pre)
	f.put(pat)
	f.put(Image{ID: digC, RepoTags: []string{"e2e/other:1"}})
	cfg := emptyConfig()
	cfg.Patterns = []string{"e2e/pat:1"}
	cfg.Preloaded = []Preloaded{{Tarball: "a.tar", Refs: []string{"e2e/pre:1"}}}
	cfg.StateDir = t.TempDir()
	p, _, _ := newTestPinner(t, cfg)
	k := newClassicKeeper(f, dirReloader(f, dir, p), p, true, p.log)
	ctx := context.Background()
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Equal(k.status.PinnedImages, 2))

	pat.RepoTags = []string{"e2e/pat:1"} // an untag of a name that does not pin
	f.put(pat)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Len(k.status.Lost, 0))

	f.remove(digA)
	f.remove(digB)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, f.has(digA), "the preloaded image is loaded again from its archive")
	assert.Check(t, is.Equal(k.status.Reloaded, 1))
	assert.Check(t, is.Len(k.status.Lost, 1))
	assert.Check(t, is.Equal(k.status.Lost[0].ID, digB))
	assert.NilError(t, k.check(ctx))
	assert.Check(t, is.Len(k.status.Lost, 1), "a loss is reported once")

	// After a restart, an image deleted meanwhile is noticed from the saved state.
	f.remove(digA)
	k = newClassicKeeper(f, dirReloader(f, dir, p), p, true, p.log)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, f.has(digA))
	assert.Check(t, is.Equal(f.loads, 2))

	// Restore off: nothing is loaded.
	f.remove(digA)
	k = newClassicKeeper(f, dirReloader(f, dir, p), p, false, p.log)
	assert.NilError(t, k.check(ctx))
	assert.Check(t, !f.has(digA))
}

// dirReloader stands in for Setup.ReloadArchiveFor: it loads the archive of dir that
// p's preload pins say provides ref.
func dirReloader(l imageLoader, dir string, p *Pinner) archiveReloader {
	return func(ctx context.Context, ref string) (string, error) {
		for _, f := range p.preloadedNow() {
			if slices.ContainsFunc(f.Refs, func(r string) bool { return refKey(r) == refKey(ref) }) {
				_, _, err := loadArchiveFile(ctx, l, filepath.Join(dir, f.Tarball))
				return f.Tarball, err
			}
		}
		return "", fmt.Errorf("no preload file provides %s: %w", ref, cerrdefs.ErrNotFound)
	}
}
