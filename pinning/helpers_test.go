package pinning

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"gotest.tools/v3/assert"
)

// Digests used across tests.
var (
	digA = "sha256:" + strings.Repeat("a", 64)
	digB = "sha256:" + strings.Repeat("b", 64)
	digC = "sha256:" + strings.Repeat("c", 64)
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// emptyConfig pins nothing: no sandbox image, no config labels.
func emptyConfig() Config {
	cfg := DefaultConfig()
	cfg.SandboxImage = ""
	cfg.ConfigLabels = false
	return cfg
}

// newTestPinner builds a Pinner with a fake clock and a log hook.
func newTestPinner(t testing.TB, cfg Config, sources ...Source) (*Pinner, *fakeClock, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := New(cfg, log, sources...)
	assert.NilError(t, err)
	clock := newFakeClock()
	p.now = clock.Now
	return p, clock, hook
}

// evaluateOne evaluates a single image through Evaluate.
func evaluateOne(t testing.TB, p *Pinner, img Image) []Reason {
	t.Helper()
	return mustEvaluate(t, p, context.Background(), []Image{img})[0]
}

// mustEvaluate is Evaluate that fails the test on an error.
func mustEvaluate(t testing.TB, p *Pinner, ctx context.Context, imgs []Image) [][]Reason {
	t.Helper()
	out, err := p.Evaluate(ctx, imgs)
	assert.NilError(t, err)
	return out
}

// warnings returns the messages of warning entries logged so far.
func warnings(hook *logtest.Hook) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e)
		}
	}
	return out
}

// fakeSource is a stateful Source pinning a set of image IDs; it can be told to fail.
type fakeSource struct {
	name   string
	source string // Reason.Source of its reasons
	mu     sync.Mutex
	ids    map[string]bool
	err    error
	calls  int
}

func newFakeSource(name string, ids ...string) *fakeSource {
	s := &fakeSource{name: name, source: SourceContainerd}
	s.Set(ids...)
	return s
}

func (s *fakeSource) Name() string { return s.name }

func (s *fakeSource) Set(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = make(map[string]bool)
	for _, id := range ids {
		s.ids[id] = true
	}
}

func (s *fakeSource) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *fakeSource) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *fakeSource) Snapshot(ctx context.Context) (Matcher, error) {
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
	return idMatcher{source: s.source, name: s.name, ids: ids}, nil
}

func (s *fakeSource) SourceStatus() map[string]any {
	return map[string]any{"namespace": "moby"}
}

// idMatcher pins a fixed set of image IDs.
type idMatcher struct {
	source string
	name   string
	ids    map[string]bool
}

func (m idMatcher) Match(img *Image) []Reason {
	if m.ids[img.ID] {
		return []Reason{{Source: m.source, Detail: m.name + " " + img.ID}}
	}
	return nil
}
