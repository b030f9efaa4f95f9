package pinning

import (
	"context"
	"testing"

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
	imgs := []Image{
		{ID: "sha256:a", RepoTags: []string{"docker.io/library/busybox:1.36"}},
		{ID: "sha256:b", RepoTags: []string{"registry.k8s.io/coredns/coredns:v1.11.1"}},
		{ID: "sha256:c", RepoTags: []string{"registry.k8s.io/coredns/coredns:v1.12.0"}}, // same repository, other tag
		{ID: untaggedID},
	}
	got := p.Evaluate(context.Background(), imgs)
	assert.DeepEqual(t, got[0], []Reason{
		{Source: SourcePattern, Detail: "busybox"},
		{Source: SourcePreload, Detail: "base.tar: busybox:1.36"},
	})
	assert.DeepEqual(t, got[1], []Reason{{Source: SourcePreload, Detail: "base.tar: registry.k8s.io/coredns/coredns:v1.11.1"}})
	assert.Check(t, len(got[2]) == 0, "a preloaded tag pins that tag only: %v", got[2])
	assert.DeepEqual(t, got[3], []Reason{{Source: SourcePreload, Detail: "untagged.tar.gz: " + untaggedID}})
	assert.DeepEqual(t, p.Info()["preloaded"], cfg.Preloaded)
}

func TestPreloadedInvalidReference(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Preloaded = []Preloaded{{Tarball: "bad.tar", Refs: []string{"Not A Ref", "ok:1", "wild*"}}}
	err := cfg.Validate()
	assert.Check(t, is.ErrorContains(err, `invalid reference "Not A Ref" loaded from bad.tar`))
	assert.Check(t, is.ErrorContains(err, `"wild*" loaded from bad.tar: wildcards are not allowed`))
}
