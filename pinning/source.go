package pinning

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/logctx"
)

// Source is a pluggable provider of pins whose state lives outside the image list
// (containerd record labels, preloaded images). Snapshot is called at most once per
// Evaluate call (so a source can make ONE remote call per ListImages); it must honour ctx.
type Source interface {
	// Name identifies the source in logs and Info.
	Name() string
	// Snapshot captures the source's current pins.
	Snapshot(ctx context.Context) (Matcher, error)
}

// Matcher answers for one image from a snapshot; must be safe for concurrent use.
type Matcher interface {
	// Match returns the reasons the snapshot pins img; nil when it does not.
	Match(img *Image) []Reason
}

// StatusReporter is optionally implemented by a Source to add its own state to Info().
type StatusReporter interface {
	// SourceStatus returns JSON-serialisable state of the source.
	SourceStatus() map[string]any
}

// noMatches is the Matcher of a snapshot that pins nothing.
type noMatches struct{}

func (noMatches) Match(*Image) []Reason { return nil }

// sourceState is a registered Source with its last good snapshot.
type sourceState struct {
	src          Source
	maxStaleness time.Duration // Config.MaxStaleness
	mu           sync.Mutex
	good         Matcher   // last good snapshot; nil before the first success
	goodAt       time.Time // when good was taken
	attemptAt    time.Time // the last Snapshot call, good or bad
	lastErr      error     // nil when the last Snapshot call succeeded
}

// AddSource registers an extra Source after construction. Reasons of sources come
// in registration order. It is safe to call concurrently with everything else.
func (p *Pinner) AddSource(s Source) {
	if s == nil {
		return
	}
	p.sourcesMu.Lock()
	defer p.sourcesMu.Unlock()
	old := p.loadSources()
	next := make([]*sourceState, len(old), len(old)+1)
	copy(next, old)
	next = append(next, &sourceState{src: s, maxStaleness: p.cfg.MaxStaleness})
	p.sources.Store(&next)
}

func (p *Pinner) loadSources() []*sourceState {
	if s := p.sources.Load(); s != nil {
		return *s
	}
	return nil
}

// matchers returns one usable Matcher per source (nil when a source has none). With
// fresh, every source takes a new snapshot; otherwise one tried within SnapshotTTL is reused.
func (p *Pinner) matchers(ctx context.Context, fresh bool) []Matcher {
	srcs := p.loadSources()
	out := make([]Matcher, len(srcs))
	if len(srcs) == 1 {
		out[0] = p.matcherOf(ctx, srcs[0], fresh)
		return out
	}
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Go(func() { out[i] = p.matcherOf(ctx, s, fresh) })
	}
	wg.Wait()
	return out
}

func (p *Pinner) matcherOf(ctx context.Context, s *sourceState, fresh bool) Matcher {
	if !fresh {
		if m, ok := p.recent(s); ok {
			return m
		}
	}
	return p.refresh(ctx, s)
}

// recent returns the usable matcher of s if a snapshot was tried within SnapshotTTL.
func (p *Pinner) recent(s *sourceState) (Matcher, bool) {
	now := p.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attemptAt.IsZero() || now.Sub(s.attemptAt) >= p.cfg.SnapshotTTL {
		return nil, false
	}
	return s.usable(now), true
}

// refresh takes a new snapshot; on failure it logs and falls back to the last good one.
func (p *Pinner) refresh(ctx context.Context, s *sourceState) Matcher {
	m, err := s.src.Snapshot(ctx)
	now := p.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attemptAt = now
	if err == nil {
		if m == nil {
			m = noMatches{}
		}
		s.good, s.goodAt, s.lastErr = m, now, nil
		return m
	}
	s.lastErr = err
	m = s.usable(now)
	p.logSourceFailure(logctx.For(ctx, p.log), s, err, m != nil, now)
	return m
}

// usable returns the last good matcher unless it is older than MaxStaleness. Caller holds mu.
func (s *sourceState) usable(now time.Time) Matcher {
	if s.lastErr == nil || s.good == nil {
		return s.good
	}
	if maxAge := s.maxStaleness; maxAge > 0 && now.Sub(s.goodAt) > maxAge {
		return nil
	}
	return s.good
}

func (p *Pinner) logSourceFailure(log logrus.FieldLogger, s *sourceState, err error, usingLastGood bool, now time.Time) {
	log = log.WithError(err).WithField("source", s.src.Name())
	switch {
	case usingLastGood:
		log.WithField("age", now.Sub(s.goodAt).Round(time.Millisecond).String()).
			Warn("pin source failed, using its last good snapshot")
	case s.good != nil:
		log.WithField("max_staleness", s.maxStaleness.String()).
			Warn("pin source failed and its last good snapshot is too old, ignoring the source")
	default:
		log.Warn("pin source failed and has no good snapshot yet, ignoring the source")
	}
}

// status reports the state of s for Info.
func (s *sourceState) status(now time.Time) map[string]any {
	s.mu.Lock()
	st := map[string]any{
		"name":        s.src.Name(),
		"healthy":     s.lastErr == nil && s.good != nil,
		"lastRefresh": formatTime(s.goodAt),
		"lastAttempt": formatTime(s.attemptAt),
		"lastError":   errString(s.lastErr),
		"usingStale":  s.lastErr != nil && s.usable(now) != nil,
	}
	s.mu.Unlock()
	if r, ok := s.src.(StatusReporter); ok {
		st["status"] = r.SourceStatus()
	}
	return st
}
