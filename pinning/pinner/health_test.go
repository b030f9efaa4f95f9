package pinner

import (
	"errors"
	"testing"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestHealth: the numbers behind the metrics follow the source's state as crictl info
// names it, and count the last evaluation's pinned images by source.
func TestHealth(t *testing.T) {
	s := pintest.NewFakeSource("ctr", pintest.DigA)
	s.Fail(errors.New("down"))
	p, clock, _ := newTestPinner(t, emptyConfig(), s)
	h := p.Health()
	assert.Check(t, h.EvaluatedAt.IsZero())
	assert.Check(t, is.DeepEqual(h.Sources, []SourceHealth{{Name: "ctr", State: SourceNeverRead}}))
	assert.Check(t, is.Equal(sourceInfo(t, p)["state"], SourceNeverRead))

	s.Fail(nil)
	pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	h = p.Health()
	assert.Check(t, is.Equal(h.Images, len(sourceImgs)))
	assert.Check(t, is.Equal(h.Pinned, 1))
	assert.Check(t, is.DeepEqual(h.PinnedBySource, map[string]int{pin.SourceContainerd: 1}))
	assert.Check(t, is.Equal(h.Sources[0].State, SourceHealthy))
	refreshed := h.Sources[0].LastRefresh
	assert.Check(t, !refreshed.IsZero())

	s.Fail(errors.New("down again"))
	clock.Advance(time.Hour)
	pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	h = p.Health()
	assert.Check(t, is.Equal(h.Sources[0].State, SourceStale))
	assert.Check(t, is.Equal(sourceInfo(t, p)["state"], SourceStale))
	assert.Check(t, h.Sources[0].LastRefresh.Equal(refreshed), "the last good answer, not the last attempt")
}

func TestHealthPreload(t *testing.T) {
	cfg := emptyConfig()
	cfg.Preloaded = []Preloaded{
		{Tarball: "a.tar", Refs: []string{"busybox:1.36", "alpine:3"}, Origin: OriginLoaded},
		{Tarball: "b.tar", Refs: []string{"nginx:1"}, Origin: OriginManifest, Failed: "no space left"},
		{Tarball: "c.tar", Failed: "truncated"},
	}
	p, _, _ := newTestPinner(t, cfg)
	h := p.Health()
	assert.Check(t, is.DeepEqual(h.PreloadArchives, map[string]int{OriginLoaded: 1, OriginManifest: 1, PreloadPinsNothing: 1}))
	assert.Check(t, is.DeepEqual(h.PreloadRefs, map[string]int{OriginLoaded: 2, OriginManifest: 1, PreloadPinsNothing: 0}))
}
