package pinner

import (
	"context"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestPreloadedImagesArePinnedExactly(t *testing.T) {
	const untaggedID = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	cfg := DefaultConfig()
	cfg.Patterns = []string{"busybox"}
	cfg.Preloaded = []Preloaded{
		{Tarball: "base.tar", Refs: []string{"busybox:1.36", "registry.k8s.io/coredns/coredns:v1.11.1"}},
		{Tarball: "untagged.tar.gz", Refs: []string{untaggedID}},
	}
	p, err := New(cfg, nil)
	assert.NilError(t, err)
	imgs := []pin.Image{
		{ID: "sha256:a", RepoTags: []string{"docker.io/library/busybox:1.36"}},
		{ID: "sha256:b", RepoTags: []string{"registry.k8s.io/coredns/coredns:v1.11.1"}},
		{ID: "sha256:c", RepoTags: []string{"registry.k8s.io/coredns/coredns:v1.12.0"}}, // same repository, other tag
		{ID: untaggedID},
	}
	got := pintest.MustEvaluate(t, p, context.Background(), imgs)
	assert.DeepEqual(t, got[0], []pin.Reason{
		{Source: pin.SourcePattern, Detail: "busybox"},
		{Source: pin.SourcePreload, Detail: "base.tar: busybox:1.36"},
	})
	assert.DeepEqual(t, got[1], []pin.Reason{{Source: pin.SourcePreload, Detail: "base.tar: registry.k8s.io/coredns/coredns:v1.11.1"}})
	assert.Check(t, len(got[2]) == 0, "a preloaded tag pins that tag only: %v", got[2])
	assert.DeepEqual(t, got[3], []pin.Reason{{Source: pin.SourcePreload, Detail: "untagged.tar.gz: " + untaggedID}})
	assert.DeepEqual(t, p.Info()["preloaded"], cfg.Preloaded)
}

func TestPreloadedInvalidReference(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Preloaded = []Preloaded{{Tarball: "bad.tar", Refs: []string{"Not A Ref", "ok:1", "wild*"}}}
	err := cfg.Validate()
	assert.Check(t, is.ErrorContains(err, `invalid reference "Not A Ref" loaded from bad.tar`))
	assert.Check(t, is.ErrorContains(err, `"wild*" loaded from bad.tar: wildcards are not allowed`))
}

// TestPreloadedKeptAcrossFailedLoads: an archive that fails to load at a later start
// keeps the pins of its last good load; only a removed archive drops them.
func TestPreloadedKeptAcrossFailedLoads(t *testing.T) {
	cfg := emptyConfig()
	cfg.StateDir = t.TempDir()
	start := func(t *testing.T, loaded ...Preloaded) *Pinner {
		t.Helper()
		c := cfg
		c.Preloaded = loaded
		p, _, _ := newTestPinner(t, c)
		return p
	}
	app := pin.Image{ID: pintest.DigA, RepoTags: []string{"app:1"}}
	db := pin.Image{ID: pintest.DigB, RepoTags: []string{"db:2"}}
	preloadReasons := func(p *Pinner) (out []string) {
		for _, rs := range pintest.MustEvaluate(t, p, t.Context(), []pin.Image{app, db}) {
			for _, r := range rs {
				if r.Source == pin.SourcePreload {
					out = append(out, r.Detail)
				}
			}
		}
		return out
	}

	p := start(t, Preloaded{Tarball: "app.tar", Refs: []string{"app:1"}, Origin: OriginLoaded},
		Preloaded{Tarball: "db.tar.gz", Refs: []string{"db:2"}, Origin: OriginLoaded})
	assert.DeepEqual(t, preloadReasons(p), []string{"app.tar: app:1", "db.tar.gz: db:2"})

	// Next start: app.tar is truncated (neither loads nor reads), db.tar.gz fails to
	// load but its manifest is readable.
	p = start(t, Preloaded{Tarball: "app.tar", Failed: "unexpected EOF"},
		Preloaded{Tarball: "db.tar.gz", Refs: []string{"db:2"}, Failed: "no space left on device", Origin: OriginManifest})
	assert.DeepEqual(t, preloadReasons(p), []string{"app.tar: app:1", "db.tar.gz: db:2"})
	info := p.Info()["preloaded"].([]Preloaded)
	assert.Equal(t, info[0].Origin, OriginSaved)
	assert.Equal(t, info[0].Failed, "unexpected EOF")

	// And again: what was kept is kept.
	p = start(t, Preloaded{Tarball: "app.tar", Failed: "unexpected EOF"})
	assert.DeepEqual(t, preloadReasons(p), []string{"app.tar: app:1"})

	// db.tar.gz was removed meanwhile (it is not in the last start's list): its pins
	// are gone even if it failed at a start after that.
	p = start(t, Preloaded{Tarball: "db.tar.gz", Failed: "unexpected EOF"})
	assert.Check(t, is.Len(preloadReasons(p), 0))
	// app.tar removed: dropped.
	p = start(t)
	assert.Check(t, is.Len(preloadReasons(p), 0))
}

// TestPreloadedNeverLoaded: an archive that never loaded and cannot be read pins
// nothing, and says so; it does not fail the start.
func TestPreloadedNeverLoaded(t *testing.T) {
	cfg := emptyConfig()
	cfg.StateDir = t.TempDir()
	cfg.Preloaded = []Preloaded{{Tarball: "new.tar", Failed: "unexpected EOF"}}
	p, _, hook := newTestPinner(t, cfg)
	assert.Check(t, pintest.MustEvaluate(t, p, t.Context(), []pin.Image{{ID: pintest.DigA, RepoTags: []string{"app:1"}}})[0] == nil)
	assert.Check(t, is.Contains(hook.LastEntry().Message, "never loaded before"))
}
