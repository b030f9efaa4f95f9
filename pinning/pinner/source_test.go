package pinner

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func pinnedBy(reasons []pin.Reason, source string) bool {
	for _, r := range reasons {
		if r.Source == source {
			return true
		}
	}
	return false
}

var sourceImgs = []pin.Image{{ID: pintest.DigA}, {ID: pintest.DigB}, {ID: pintest.DigC}}

func TestSourceOneSnapshotPerEvaluate(t *testing.T) {
	s1, s2 := pintest.NewFakeSource("one", pintest.DigA), pintest.NewFakeSource("two", pintest.DigB)
	p, _, _ := newTestPinner(t, emptyConfig(), s1, s2)
	for i := 1; i <= 3; i++ {
		got := pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
		assert.Equal(t, s1.Calls(), i)
		assert.Equal(t, s2.Calls(), i)
		assert.Assert(t, pinnedBy(got[0], pin.SourceContainerd))
		assert.Assert(t, pinnedBy(got[1], pin.SourceContainerd))
		assert.Assert(t, got[2] == nil)
	}
}

func TestSourceChangeTakesEffectNextEvaluate(t *testing.T) {
	s := pintest.NewFakeSource("ctr")
	p, _, _ := newTestPinner(t, emptyConfig(), s)
	assert.Assert(t, pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[1] == nil)
	s.Set(pintest.DigB)
	assert.Assert(t, pinnedBy(pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[1], pin.SourceContainerd))
}

func TestSourceFailureUsesLastGood(t *testing.T) {
	s := pintest.NewFakeSource("ctr", pintest.DigA)
	other := pintest.NewFakeSource("preload", pintest.DigC)
	other.ReasonSource = pin.SourcePreload
	cfg := emptyConfig()
	cfg.MaxStaleness = time.Minute
	p, clock, hook := newTestPinner(t, cfg, s, other)
	assert.Assert(t, pinnedBy(pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[0], pin.SourceContainerd))

	s.Set() // a fresh snapshot would pin nothing
	s.Fail(errors.New("containerd unavailable"))
	clock.Advance(30 * time.Second)
	got := pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	assert.Assert(t, pinnedBy(got[0], pin.SourceContainerd), "last good snapshot is used")
	assert.Assert(t, pinnedBy(got[2], pin.SourcePreload), "other sources still apply")
	warns := pintest.Warnings(hook)
	assert.Equal(t, len(warns), 1)
	assert.Equal(t, warns[0].Data["source"], "ctr")
	assert.ErrorContains(t, warns[0].Data["error"].(error), "containerd unavailable")

	info := sourceInfo(t, p)
	assert.Equal(t, info["healthy"], false)
	assert.Equal(t, info["usingStale"], true)
	assert.Equal(t, info["lastError"], "containerd unavailable")

	clock.Advance(31 * time.Second) // the last good snapshot is now 61s old
	_, err := p.Evaluate(t.Context(), sourceImgs)
	assert.Check(t, cerrdefs.IsUnavailable(err), "too stale: the list is refused, not answered without its pins: %v", err)
	assert.Check(t, errors.Is(err, pin.ErrNoPinState))
	assert.Check(t, is.ErrorContains(err, "pin source ctr fails (containerd unavailable) and its last good state"))
	// ImageStatus (Check) goes on without the source's reasons; the others apply.
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[2]), pin.SourcePreload))
	info = sourceInfo(t, p)
	assert.Equal(t, info["usingStale"], false)
	assert.Equal(t, info["state"], "expired")

	s.Fail(nil)
	s.Set(pintest.DigB)
	got = pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	assert.Assert(t, got[0] == nil)
	assert.Assert(t, pinnedBy(got[1], pin.SourceContainerd), "recovered")
	assert.Equal(t, sourceInfo(t, p)["healthy"], true)
}

// downAfterGoodSnapshot returns a pinner whose source "ctr" gave one good snapshot
// (pintest.DigA pinned) and now fails, the source and the pinner's clock.
func downAfterGoodSnapshot(t *testing.T) (*Pinner, *pintest.FakeSource, *pintest.FakeClock) {
	t.Helper()
	s := pintest.NewFakeSource("ctr", pintest.DigA)
	p, clock, _ := newTestPinner(t, emptyConfig(), s)
	pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	s.Fail(errors.New("down"))
	return p, s, clock
}

func TestSourceFailureZeroStalenessIsForever(t *testing.T) {
	p, _, clock := downAfterGoodSnapshot(t)
	clock.Advance(1000 * time.Hour)
	assert.Assert(t, pinnedBy(pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[0], pin.SourceContainerd))
}

// TestSourceFailingFromStart: a source that never answered has no state to answer
// from: ListImages is refused (Unavailable, naming it) instead of showing its pinned
// images unpinned; ImageStatus goes on; the first answer ends it.
func TestSourceFailingFromStart(t *testing.T) {
	s := pintest.NewFakeSource("ctr", pintest.DigA)
	s.Fail(errors.New("down"))
	p, _, hook := newTestPinner(t, emptyConfig(), s)
	for range 3 {
		got, err := p.Evaluate(t.Context(), sourceImgs)
		assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
		assert.Check(t, errors.Is(err, pin.ErrNoPinState))
		assert.Check(t, is.ErrorContains(err, "pin source ctr has never answered (down)"))
		assert.Check(t, got == nil)
	}
	assert.Check(t, p.Check(t.Context(), sourceImgs[0]) == nil)
	assert.Equal(t, len(pintest.Warnings(hook)), 3)
	info := sourceInfo(t, p)
	assert.Equal(t, info["healthy"], false)
	assert.Equal(t, info["state"], "never read")
	assert.Check(t, is.Contains(info["reason"], "never answered"))

	s.Fail(nil)
	assert.Assert(t, pinnedBy(pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[0], pin.SourceContainerd))
	assert.Equal(t, sourceInfo(t, p)["state"], "healthy")
}

// TestSourceStatePersisted: a source's last good snapshot is saved in StateDir when it
// changes and answers, after a restart, while the source fails; the first good
// snapshot replaces it.
func TestSourceStatePersisted(t *testing.T) {
	dir := t.TempDir()
	cfg := emptyConfig()
	cfg.StateDir = dir
	s := &codecSource{FakeSource: pintest.NewFakeSource("ctr", pintest.DigA)}
	p, _, _ := newTestPinner(t, cfg, s)
	assert.Assert(t, pinnedBy(pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[0], pin.SourceContainerd))
	file := filepath.Join(dir, "source-ctr.json")
	saved, err := os.ReadFile(file)
	assert.NilError(t, err)
	fi, err := os.Stat(file)
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o600))
	assert.Check(t, is.Contains(string(saved), pintest.DigA))
	pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	assert.Equal(t, s.encodes(), 2)
	fi2, err := os.Stat(file)
	assert.NilError(t, err)
	assert.Check(t, os.SameFile(fi, fi2), "an unchanged snapshot is not written again")
	entries, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1, "no temporary file is left")

	// Restart with the source down: the saved state answers.
	s2 := &codecSource{FakeSource: pintest.NewFakeSource("ctr", pintest.DigB)}
	s2.Fail(errors.New("containerd down"))
	p2, _, _ := newTestPinner(t, cfg, s2)
	info := sourceInfo(t, p2)
	assert.Equal(t, info["state"], "stale")
	assert.Equal(t, info["restored"], true)
	assert.Check(t, is.Contains(info["reason"], "not read yet"))
	for range 3 {
		got := pintest.MustEvaluate(t, p2, t.Context(), sourceImgs)
		assert.Check(t, pinnedBy(got[0], pin.SourceContainerd) && !pinnedBy(got[1], pin.SourceContainerd))
	}
	assert.Equal(t, sourceInfo(t, p2)["reason"], "containerd down")

	s2.Fail(nil)
	got := pintest.MustEvaluate(t, p2, t.Context(), sourceImgs)
	assert.Check(t, !pinnedBy(got[0], pin.SourceContainerd) && pinnedBy(got[1], pin.SourceContainerd))
	assert.Equal(t, sourceInfo(t, p2)["state"], "healthy")
	saved, err = os.ReadFile(file)
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(saved), pintest.DigB))
}

// TestSourceStateCorrupt: a damaged state file is reported and ignored (the source
// then has no state), never a crash.
func TestSourceStateCorrupt(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "source-ctr.json"), []byte(`{"snapshot":`), 0o600))
	cfg := emptyConfig()
	cfg.StateDir = dir
	s := &codecSource{FakeSource: pintest.NewFakeSource("ctr", pintest.DigA)}
	s.Fail(errors.New("down"))
	p, _, hook := newTestPinner(t, cfg, s)
	_, err := p.Evaluate(t.Context(), sourceImgs)
	assert.Check(t, cerrdefs.IsUnavailable(err))
	assert.Check(t, is.Contains(pintest.Warnings(hook)[0].Data["error"].(error).Error(), "corrupt"))
}

// TestSourceStateUnwritable: a state directory that cannot be written is reported in
// Info and the log; the pins still answer.
func TestSourceStateUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	assert.NilError(t, os.WriteFile(file, nil, 0o600))
	cfg := emptyConfig()
	cfg.StateDir = filepath.Join(file, "state") // below a file: cannot be made
	s := &codecSource{FakeSource: pintest.NewFakeSource("ctr", pintest.DigA)}
	p, _, hook := newTestPinner(t, cfg, s)
	assert.Assert(t, pinnedBy(pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[0], pin.SourceContainerd))
	assert.Check(t, is.Contains(sourceInfo(t, p)["saveError"], "pin state directory"))
	saveWarnings := func() (n int) {
		for _, w := range pintest.Warnings(hook) {
			if strings.Contains(w.Message, "cannot save the last good pins") {
				n++
			}
		}
		return n
	}
	assert.Equal(t, saveWarnings(), 1)
	pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	assert.Equal(t, saveWarnings(), 1, "the save failure is warned once")
}

// codecSource is a pintest.FakeSource whose snapshots can be saved (a SnapshotCodec).
type codecSource struct {
	*pintest.FakeSource
	mu      sync.Mutex
	encoded int
}

func (s *codecSource) EncodeSnapshot(m pin.Matcher) ([]byte, error) {
	s.mu.Lock()
	s.encoded++
	s.mu.Unlock()
	return json.Marshal(slices.Sorted(maps.Keys(m.(pintest.IDMatcher).IDs)))
}

func (s *codecSource) DecodeSnapshot(b []byte) (pin.Matcher, error) {
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		return nil, err
	}
	m := pintest.IDMatcher{Source: s.ReasonSource, Name: s.Name(), IDs: map[string]bool{}}
	for _, id := range ids {
		m.IDs[id] = true
	}
	return m, nil
}

func (s *codecSource) encodes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.encoded
}

func TestSourceHonoursContext(t *testing.T) {
	s := pintest.NewFakeSource("ctr", pintest.DigA)
	p, _, _ := newTestPinner(t, emptyConfig(), s)
	pintest.MustEvaluate(t, p, t.Context(), sourceImgs)
	s.Set()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	got := pintest.MustEvaluate(t, p, ctx, sourceImgs)
	assert.Assert(t, pinnedBy(got[0], pin.SourceContainerd), "cancelled snapshot falls back to the last good one")
	assert.ErrorContains(t, errors.New(sourceInfo(t, p)["lastError"].(string)), "context canceled")
}

func TestCheckReusesSnapshotWithinTTL(t *testing.T) {
	s := pintest.NewFakeSource("ctr", pintest.DigA)
	p, clock, _ := newTestPinner(t, emptyConfig(), s)
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), pin.SourceContainerd))
	assert.Equal(t, s.Calls(), 1)

	s.Set(pintest.DigB)
	clock.Advance(time.Second)
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), pin.SourceContainerd), "reused snapshot")
	assert.Equal(t, s.Calls(), 1)

	clock.Advance(time.Second) // 2s old: not younger than the TTL
	assert.Assert(t, !pinnedBy(p.Check(t.Context(), sourceImgs[0]), pin.SourceContainerd))
	assert.Equal(t, s.Calls(), 2)

	pintest.MustEvaluate(t, p, t.Context(), sourceImgs) // Evaluate always takes a fresh one
	assert.Equal(t, s.Calls(), 3)
	p.Check(t.Context(), sourceImgs[1]) // and Check reuses it
	assert.Equal(t, s.Calls(), 3)
}

func TestCheckDoesNotRetryFailingSourceWithinTTL(t *testing.T) {
	p, s, clock := downAfterGoodSnapshot(t)
	clock.Advance(3 * time.Second)
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), pin.SourceContainerd))
	assert.Assert(t, pinnedBy(p.Check(t.Context(), sourceImgs[0]), pin.SourceContainerd))
	assert.Equal(t, s.Calls(), 2)
}

// nilSource returns neither a matcher nor an error.
type nilSource struct{}

func (nilSource) Name() string                                  { return "nil" }
func (nilSource) Snapshot(context.Context) (pin.Matcher, error) { return nil, nil }

func TestSourceNilMatcher(t *testing.T) {
	p, _, _ := newTestPinner(t, emptyConfig(), nilSource{}, nil)
	assert.Assert(t, pintest.MustEvaluate(t, p, t.Context(), sourceImgs)[0] == nil)
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
