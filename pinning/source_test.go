package pinning

import (
	"context"
	"errors"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func pinnedBy(reasons []Reason, source string) bool {
	for _, r := range reasons {
		if r.Source == source {
			return true
		}
	}
	return false
}

var sourceImgs = []Image{{ID: digA}, {ID: digB}, {ID: digC}}

func TestSourceOneSnapshotPerEvaluate(t *testing.T) {
	s1, s2 := newFakeSource("one", digA), newFakeSource("two", digB)
	p, _, _ := newTestPinner(t, emptyConfig(), s1, s2)
	for i := 1; i <= 3; i++ {
		got := p.Evaluate(t.Context(), sourceImgs)
		assert.Equal(t, s1.Calls(), i)
		assert.Equal(t, s2.Calls(), i)
		assert.Assert(t, pinnedBy(got[0], SourceContainerd))
		assert.Assert(t, pinnedBy(got[1], SourceContainerd))
		assert.Assert(t, got[2] == nil)
	}
}

func TestSourceChangeTakesEffectNextEvaluate(t *testing.T) {
	s := newFakeSource("ctr")
	p, _, _ := newTestPinner(t, emptyConfig(), s)
	assert.Assert(t, p.Evaluate(t.Context(), sourceImgs)[1] == nil)
	s.Set(digB)
	assert.Assert(t, pinnedBy(p.Evaluate(t.Context(), sourceImgs)[1], SourceContainerd))
}

func TestSourceFailureUsesLastGood(t *testing.T) {
	s := newFakeSource("ctr", digA)
	other := newFakeSource("preload", digC)
	other.source = SourcePreload
	cfg := emptyConfig()
	cfg.MaxStaleness = time.Minute
	p, clock, hook := newTestPinner(t, cfg, s, other)
	assert.Assert(t, pinnedBy(p.Evaluate(t.Context(), sourceImgs)[0], SourceContainerd))

	s.Set() // a fresh snapshot would pin nothing
	s.Fail(errors.New("containerd unavailable"))
	clock.Advance(30 * time.Second)
	got := p.Evaluate(t.Context(), sourceImgs)
	assert.Assert(t, pinnedBy(got[0], SourceContainerd), "last good snapshot is used")
	assert.Assert(t, pinnedBy(got[2], SourcePreload), "other sources still apply")
	warns := warnings(hook)
	assert.Equal(t, len(warns), 1)
	assert.Equal(t, warns[0].Data["source"], "ctr")
	assert.ErrorContains(t, warns[0].Data["error"].(error), "containerd unavailable")

	info := sourceInfo(t, p)
	assert.Equal(t, info["healthy"], false)
	assert.Equal(t, info["usingStale"], true)
	assert.Equal(t, info["lastError"], "containerd unavailable")

	clock.Advance(31 * time.Second) // the last good snapshot is now 61s old
	got = p.Evaluate(t.Context(), sourceImgs)
	assert.Assert(t, got[0] == nil, "too stale: dropped")
	assert.Assert(t, pinnedBy(got[2], SourcePreload))
	assert.Equal(t, sourceInfo(t, p)["usingStale"], false)

	s.Fail(nil)
	s.Set(digB)
	got = p.Evaluate(t.Context(), sourceImgs)
	assert.Assert(t, got[0] == nil)
	assert.Assert(t, pinnedBy(got[1], SourceContainerd), "recovered")
	assert.Equal(t, sourceInfo(t, p)["healthy"], true)
}

func TestSourceFailureZeroStalenessIsForever(t *testing.T) {
	s := newFakeSource("ctr", digA)
	p, clock, _ := newTestPinner(t, emptyConfig(), s)
	p.Evaluate(t.Context(), sourceImgs)
	s.Fail(errors.New("down"))
	clock.Advance(1000 * time.Hour)
	assert.Assert(t, pinnedBy(p.Evaluate(t.Context(), sourceImgs)[0], SourceContainerd))
}

func TestSourceFailingFromStart(t *testing.T) {
	s := newFakeSource("ctr", digA)
	s.Fail(errors.New("down"))
	p, _, hook := newTestPinner(t, emptyConfig(), s)
	assert.Assert(t, p.Evaluate(t.Context(), sourceImgs)[0] == nil)
	assert.Equal(t, len(warnings(hook)), 1)
	assert.Equal(t, sourceInfo(t, p)["healthy"], false)
}

func TestSourceHonoursContext(t *testing.T) {
	s := newFakeSource("ctr", digA)
	p, _, _ := newTestPinner(t, emptyConfig(), s)
	p.Evaluate(t.Context(), sourceImgs)
	s.Set()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	got := p.Evaluate(ctx, sourceImgs)
	assert.Assert(t, pinnedBy(got[0], SourceContainerd), "cancelled snapshot falls back to the last good one")
	assert.ErrorContains(t, errors.New(sourceInfo(t, p)["lastError"].(string)), "context canceled")
}

func TestCheckReusesSnapshotWithinTTL(t *testing.T) {
	s := newFakeSource("ctr", digA)
	p, clock, _ := newTestPinner(t, emptyConfig(), s)
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), SourceContainerd))
	assert.Equal(t, s.Calls(), 1)

	s.Set(digB)
	clock.Advance(time.Second)
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), SourceContainerd), "reused snapshot")
	assert.Equal(t, s.Calls(), 1)

	clock.Advance(time.Second) // 2s old: not younger than the TTL
	assert.Assert(t, !pinnedBy(p.Check(t.Context(), sourceImgs[0]), SourceContainerd))
	assert.Equal(t, s.Calls(), 2)

	p.Evaluate(t.Context(), sourceImgs) // Evaluate always takes a fresh one
	assert.Equal(t, s.Calls(), 3)
	p.Check(t.Context(), sourceImgs[1]) // and Check reuses it
	assert.Equal(t, s.Calls(), 3)
}

func TestCheckDoesNotRetryFailingSourceWithinTTL(t *testing.T) {
	s := newFakeSource("ctr", digA)
	p, clock, _ := newTestPinner(t, emptyConfig(), s)
	p.Evaluate(t.Context(), sourceImgs)
	s.Fail(errors.New("down"))
	clock.Advance(3 * time.Second)
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), SourceContainerd))
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), SourceContainerd))
	assert.Equal(t, s.Calls(), 2)
}

// nilSource returns neither a matcher nor an error.
type nilSource struct{}

func (nilSource) Name() string                              { return "nil" }
func (nilSource) Snapshot(context.Context) (Matcher, error) { return nil, nil }

func TestSourceNilMatcher(t *testing.T) {
	p, _, _ := newTestPinner(t, emptyConfig(), nilSource{}, nil)
	assert.Assert(t, p.Evaluate(t.Context(), sourceImgs)[0] == nil)
	assert.Equal(t, sourceInfo(t, p)["healthy"], true)
	assert.Equal(t, len(p.Info()["sources"].([]map[string]any)), 1)
}

// sourceInfo returns the Info entry of the first source.
func sourceInfo(t *testing.T, p *Pinner) map[string]any {
	t.Helper()
	srcs := p.Info()["sources"].([]map[string]any)
	assert.Assert(t, len(srcs) > 0)
	return srcs[0]
}
