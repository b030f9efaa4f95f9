package pinner

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
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
	late := pintest.NewFakeSource("late", pintest.DigA)
	late.ReasonSource = pin.SourcePreload
	ctr := pintest.NewFakeSource("ctr", pintest.DigA)
	p, _, _ := newTestPinner(t, cfg, ctr)
	p.AddSource(late)
	p.AddSource(ctr) // registered twice: same reasons, reported once

	img := pin.Image{
		ID:          pintest.DigA,
		RepoTags:    []string{"pause:3.10", "docker.io/library/pause:3.10"},
		RepoDigests: []string{"pause@" + pintest.DigA},
		Labels:      map[string]string{pin.PinnedLabel: pin.PinnedValue, "tier": "infra"},
	}
	want := []pin.Reason{
		{Source: pin.SourceSandboxImage, Detail: "pause:3.10"},
		{Source: pin.SourceConfigLabel, Detail: "label io.cri-containerd.pinned=pinned"},
		{Source: pin.SourcePattern, Detail: "docker.io/library/pause:3.10"},
		{Source: pin.SourcePattern, Detail: "pause*"},
		{Source: pin.SourcePattern, Detail: "pause:3.10"},
		{Source: pin.SourceLabelSelector, Detail: "label tier=infra"},
		{Source: pin.SourceLabelSelector, Detail: "label tier"},
		{Source: pin.SourcePinsFile, Detail: "*pause*"},
		{Source: pin.SourcePinsFile, Detail: "pause"},
		{Source: pin.SourceContainerd, Detail: "ctr " + pintest.DigA},
		{Source: pin.SourcePreload, Detail: "late " + pintest.DigA},
	}
	assert.DeepEqual(t, pintest.EvaluateOne(t, p, img), want)
	assert.DeepEqual(t, p.Check(t.Context(), img), want)
}

func TestEvaluateResultsAreIndependent(t *testing.T) {
	cfg := emptyConfig()
	cfg.Patterns = []string{"busybox", "*box*"}
	p, _, _ := newTestPinner(t, cfg)
	imgs := make([]pin.Image, 200)
	for i := range imgs {
		imgs[i] = pin.Image{ID: fmt.Sprintf("sha256:%064x", i), RepoTags: []string{fmt.Sprintf("busybox:%d", i)}}
		if i%3 == 0 {
			imgs[i].RepoTags[0] = fmt.Sprintf("nginx:%d", i)
		}
	}
	got := pintest.MustEvaluate(t, p, t.Context(), imgs)
	assert.Equal(t, len(got), len(imgs))
	for i, reasons := range got {
		if i%3 == 0 {
			assert.Assert(t, reasons == nil, "image %d", i)
			continue
		}
		assert.DeepEqual(t, reasons, []pin.Reason{{Source: pin.SourcePattern, Detail: "busybox"}, {Source: pin.SourcePattern, Detail: "*box*"}})
		assert.Equal(t, cap(reasons), len(reasons), "appending must not clobber a neighbour")
	}
}

func TestEvaluateEmpty(t *testing.T) {
	p, _, _ := newTestPinner(t, DefaultConfig())
	assert.Equal(t, len(pintest.MustEvaluate(t, p, t.Context(), nil)), 0)
}

func TestNewNilLogger(t *testing.T) {
	p, err := New(DefaultConfig(), nil)
	assert.NilError(t, err)
	img := pin.Image{ID: pintest.DigA, Labels: map[string]string{pin.MisspelledLabel: "x"}}
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
	p, _, _ := newTestPinner(t, cfg, pintest.NewFakeSource("ctr", pintest.DigA))
	imgs := []pin.Image{
		{ID: pintest.DigA, RepoTags: []string{"busybox:1"}},
		{ID: pintest.DigB, RepoTags: []string{"alpine:3"}},
		{ID: pintest.DigC, RepoTags: []string{"nginx:1"}},
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
			p.AddSource(pintest.NewFakeSource(fmt.Sprintf("extra%d", i)))
		}
	}
	close(stop)
	wg.Wait()
}

// readUntilStopped evaluates imgs until stop is closed, checking that every
// result comes from one whole pins file.
func readUntilStopped(t *testing.T, p *Pinner, imgs []pin.Image, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		details := fmt.Sprint(fileDetails(pintest.MustEvaluate(t, p, t.Context(), imgs)))
		assert.Check(t, details == "[busybox alpine:3]" || details == "[*alp* nginx]", "mixed sets: %v", details)
		p.Check(t.Context(), imgs[0])
		p.Info()
	}
}

// fileDetails lists the pins-file patterns that matched, image by image.
func fileDetails(results [][]pin.Reason) []string {
	var out []string
	for _, reasons := range results {
		for _, r := range reasons {
			if r.Source == pin.SourcePinsFile {
				out = append(out, r.Detail)
			}
		}
	}
	return out
}
