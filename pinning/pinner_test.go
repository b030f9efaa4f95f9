package pinning

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
)

func TestEvaluateReasonsOrderAndDedup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	writePins(t, path, "*pause*", "pause", "*pause*")
	cfg := DefaultConfig()
	cfg.SandboxImage = "pause:3.10"
	cfg.Patterns = []string{"docker.io/library/pause:3.10", "pause*", "pause:3.10", "pause:3.10"}
	cfg.LabelSelectors = []string{"tier=infra", "tier"}
	cfg.PinsFile = path
	late := newFakeSource("late", digA)
	late.source = SourcePreload
	ctr := newFakeSource("ctr", digA)
	p, _, _ := newTestPinner(t, cfg, ctr)
	p.AddSource(late)
	p.AddSource(ctr) // registered twice: same reasons, reported once

	img := Image{
		ID:          digA,
		RepoTags:    []string{"pause:3.10", "docker.io/library/pause:3.10"},
		RepoDigests: []string{"pause@" + digA},
		Labels:      map[string]string{PinnedLabel: PinnedValue, "tier": "infra"},
	}
	want := []Reason{
		{SourceSandboxImage, "pause:3.10"},
		{SourceConfigLabel, "label io.cri-containerd.pinned=pinned"},
		{SourcePattern, "docker.io/library/pause:3.10"},
		{SourcePattern, "pause*"},
		{SourcePattern, "pause:3.10"},
		{SourceLabelSelector, "label tier=infra"},
		{SourceLabelSelector, "label tier"},
		{SourcePinsFile, "*pause*"},
		{SourcePinsFile, "pause"},
		{SourceContainerd, "ctr " + digA},
		{SourcePreload, "late " + digA},
	}
	assert.DeepEqual(t, evaluateOne(t, p, img), want)
	assert.DeepEqual(t, p.Check(t.Context(), img), want)
}

func TestEvaluateResultsAreIndependent(t *testing.T) {
	cfg := emptyConfig()
	cfg.Patterns = []string{"busybox", "*box*"}
	p, _, _ := newTestPinner(t, cfg)
	imgs := make([]Image, 200)
	for i := range imgs {
		imgs[i] = Image{ID: fmt.Sprintf("sha256:%064x", i), RepoTags: []string{fmt.Sprintf("busybox:%d", i)}}
		if i%3 == 0 {
			imgs[i].RepoTags[0] = fmt.Sprintf("nginx:%d", i)
		}
	}
	got := mustEvaluate(t, p, t.Context(), imgs)
	assert.Equal(t, len(got), len(imgs))
	for i, reasons := range got {
		if i%3 == 0 {
			assert.Assert(t, reasons == nil, "image %d", i)
			continue
		}
		assert.DeepEqual(t, reasons, []Reason{{SourcePattern, "busybox"}, {SourcePattern, "*box*"}})
		assert.Equal(t, cap(reasons), len(reasons), "appending must not clobber a neighbour")
	}
}

func TestEvaluateEmpty(t *testing.T) {
	p, _, _ := newTestPinner(t, DefaultConfig())
	assert.Equal(t, len(mustEvaluate(t, p, t.Context(), nil)), 0)
}

func TestNewNilLogger(t *testing.T) {
	p, err := New(DefaultConfig(), nil)
	assert.NilError(t, err)
	img := Image{ID: digA, Labels: map[string]string{MisspelledLabel: "x"}}
	assert.Assert(t, p.Check(t.Context(), img) == nil)
}

// TestConcurrentEvaluateAndReload runs Evaluate, Check, Info and AddSource while the
// pins file is rewritten and reloaded; each result must come from one whole set.
func TestConcurrentEvaluateAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	setA := []string{"busybox", "alpine:3"}
	setB := []string{"nginx", "*alp*"}
	writePins(t, path, setA...)
	cfg := DefaultConfig()
	cfg.PinsFile = path
	p, _, _ := newTestPinner(t, cfg, newFakeSource("ctr", digA))
	imgs := []Image{
		{ID: digA, RepoTags: []string{"busybox:1"}},
		{ID: digB, RepoTags: []string{"alpine:3"}},
		{ID: digC, RepoTags: []string{"nginx:1"}},
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() { readUntilStopped(t, p, imgs, stop) })
	}
	for i := range 50 {
		set := setA
		if i%2 == 0 {
			set = setB
		}
		tmp := path + ".tmp"
		writePins(t, tmp, set...)
		assert.NilError(t, os.Rename(tmp, path))
		assert.NilError(t, p.Reload())
		if i%10 == 0 {
			p.AddSource(newFakeSource(fmt.Sprintf("extra%d", i)))
		}
	}
	close(stop)
	wg.Wait()
}

// readUntilStopped evaluates imgs until stop is closed, checking that every
// result comes from one whole pins file.
func readUntilStopped(t *testing.T, p *Pinner, imgs []Image, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		details := fmt.Sprint(fileDetails(mustEvaluate(t, p, t.Context(), imgs)))
		assert.Check(t, details == "[busybox alpine:3]" || details == "[*alp* nginx]", "mixed sets: %v", details)
		p.Check(t.Context(), imgs[0])
		p.Info()
	}
}

// fileDetails lists the pins-file patterns that matched, image by image.
func fileDetails(results [][]Reason) []string {
	var out []string
	for _, reasons := range results {
		for _, r := range reasons {
			if r.Source == SourcePinsFile {
				out = append(out, r.Detail)
			}
		}
	}
	return out
}
