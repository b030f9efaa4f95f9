// Package pintest holds the fakes and helpers that the tests of pinning's packages
// share: a settable clock, a stateful Source, and evaluation helpers.
package pintest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
)

// Evaluator is what the evaluation helpers need: a *pinner.Pinner.
type Evaluator interface {
	Evaluate(ctx context.Context, imgs []pin.Image) ([][]pin.Reason, error)
}

// Digests used across tests.
var (
	DigA = "sha256:" + strings.Repeat("a", 64)
	DigB = "sha256:" + strings.Repeat("b", 64)
	DigC = "sha256:" + strings.Repeat("c", 64)
)

// FakeClock is a settable clock, safe for concurrent use.
type FakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewFakeClock returns a clock at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now is the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// EvaluateOne evaluates a single image through Evaluate.
func EvaluateOne(t testing.TB, p Evaluator, img pin.Image) []pin.Reason {
	t.Helper()
	return MustEvaluate(t, p, context.Background(), []pin.Image{img})[0]
}

// MustEvaluate is Evaluate that fails the test on an error.
func MustEvaluate(t testing.TB, p Evaluator, ctx context.Context, imgs []pin.Image) [][]pin.Reason {
	t.Helper()
	out, err := p.Evaluate(ctx, imgs)
	assert.NilError(t, err)
	return out
}

// Warnings returns the messages of warning entries logged so far.
func Warnings(hook *logtest.Hook) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e)
		}
	}
	return out
}

// FakeSource is a stateful Source pinning a set of image IDs; it can be told to fail.
type FakeSource struct {
	name string
	// ReasonSource is the Source of the reasons it gives (pin.SourceContainerd by default).
	ReasonSource string
	mu           sync.Mutex
	ids          map[string]bool
	err          error
	calls        int
}

// NewFakeSource returns a source called name pinning ids.
func NewFakeSource(name string, ids ...string) *FakeSource {
	s := &FakeSource{name: name, ReasonSource: pin.SourceContainerd}
	s.Set(ids...)
	return s
}

// Name implements pin.Source.
func (s *FakeSource) Name() string { return s.name }

// Set replaces the pinned IDs.
func (s *FakeSource) Set(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = make(map[string]bool)
	for _, id := range ids {
		s.ids[id] = true
	}
}

// Fail makes the next snapshots fail with err (nil: succeed again).
func (s *FakeSource) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Calls is the number of Snapshot calls so far.
func (s *FakeSource) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Snapshot implements pin.Source.
func (s *FakeSource) Snapshot(ctx context.Context) (pin.Matcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.err != nil {
		return nil, s.err
	}
	ids := make(map[string]bool, len(s.ids))
	for id := range s.ids {
		ids[id] = true
	}
	return IDMatcher{Source: s.ReasonSource, Name: s.name, IDs: ids}, nil
}

// SourceStatus implements pin.StatusReporter.
func (s *FakeSource) SourceStatus() map[string]any {
	return map[string]any{"namespace": "moby"}
}

// IDMatcher pins a fixed set of image IDs.
type IDMatcher struct {
	Source string // of its reasons
	Name   string // in its reasons' detail
	IDs    map[string]bool
}

// Match implements pin.Matcher.
func (m IDMatcher) Match(img *pin.Image) []pin.Reason {
	if m.IDs[img.ID] {
		return []pin.Reason{{Source: m.Source, Detail: m.Name + " " + img.ID}}
	}
	return nil
}
