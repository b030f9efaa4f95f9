package pinner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// persistedSnapshot is the state file of a source's last good snapshot.
type persistedSnapshot struct {
	Source   string          `json:"source"`
	TakenAt  time.Time       `json:"takenAt"`
	Snapshot json.RawMessage `json:"snapshot"`
}

// sourceState is a registered Source with its last good snapshot.
type sourceState struct {
	src          pin.Source
	maxStaleness time.Duration // Config.MaxStaleness
	mu           sync.Mutex
	good         pin.Matcher // last good snapshot; nil before the first success
	goodAt       time.Time   // when good was taken
	restored     bool        // good was read from the state directory, not taken by this process
	attemptAt    time.Time   // the last Snapshot call, good or bad
	lastErr      error       // nil when the last Snapshot call succeeded
	failingSince time.Time   // the first failure after the last success; zero while healthy

	saveMu  sync.Mutex // serialises saves of this source's state
	saved   []byte     // what the state file holds
	saveErr error      // why the last save failed; nil when it succeeded
}

// stateName is the name of a source's state file.
func stateName(s pin.Source) string { return "source-" + s.Name() }

// AddSource registers an extra Source after construction. Reasons of sources come
// in registration order. It is safe to call concurrently with everything else.
func (p *Pinner) AddSource(s pin.Source) {
	if s == nil {
		return
	}
	p.sourcesMu.Lock()
	defer p.sourcesMu.Unlock()
	old := p.loadSources()
	next := make([]*sourceState, len(old), len(old)+1)
	copy(next, old)
	next = append(next, p.restoreSource(&sourceState{src: s, maxStaleness: p.cfg.MaxStaleness}))
	p.sources.Store(&next)
}

// restoreSource gives st the last good snapshot persisted for its source, if any.
func (p *Pinner) restoreSource(st *sourceState) *sourceState {
	codec, ok := st.src.(pin.SnapshotCodec)
	if !ok {
		return st
	}
	log := p.log.WithField("source", st.src.Name())
	var ps persistedSnapshot
	found, err := p.store.Load(stateName(st.src), &ps)
	if err == nil && found {
		var m pin.Matcher
		if m, err = codec.DecodeSnapshot(ps.Snapshot); err == nil {
			st.good, st.goodAt, st.restored, st.saved = m, ps.TakenAt, true, ps.Snapshot
			log.WithField("taken_at", pin.FormatTime(ps.TakenAt)).
				Info("restored the last good pins of the source; they answer until it does")
			return st
		}
	}
	if err != nil {
		log.WithError(err).Warn("cannot restore the last good pins of the source")
	}
	return st
}

func (p *Pinner) loadSources() []*sourceState {
	if s := p.sources.Load(); s != nil {
		return *s
	}
	return nil
}

// matchers returns one usable Matcher per source. With fresh, every source takes a
// new snapshot; otherwise one tried within SnapshotTTL is reused. A source that
// cannot answer and has no usable last good state gets a nil Matcher, and the error
// (wrapping ErrNoPinState and errdefs' Unavailable) names it.
func (p *Pinner) matchers(ctx context.Context, fresh bool) ([]pin.Matcher, error) {
	srcs := p.loadSources()
	out := make([]pin.Matcher, len(srcs))
	errs := make([]error, len(srcs))
	if len(srcs) == 1 {
		out[0], errs[0] = p.matcherOf(ctx, srcs[0], fresh)
	} else {
		var wg sync.WaitGroup
		for i, s := range srcs {
			wg.Go(func() { out[i], errs[i] = p.matcherOf(ctx, s, fresh) })
		}
		wg.Wait()
	}
	return out, errors.Join(errs...)
}

func (p *Pinner) matcherOf(ctx context.Context, s *sourceState, fresh bool) (pin.Matcher, error) {
	if !fresh {
		if m, ok, err := p.recent(s); ok {
			return m, err
		}
	}
	return p.refresh(ctx, s)
}

// recent returns the usable matcher of s if a snapshot was tried within SnapshotTTL.
func (p *Pinner) recent(s *sourceState) (pin.Matcher, bool, error) {
	now := p.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attemptAt.IsZero() || now.Sub(s.attemptAt) >= p.cfg.SnapshotTTL {
		return nil, false, nil
	}
	m, err := s.usable(now)
	return m, true, err
}

// refresh takes a new snapshot; on failure it logs and falls back to the last good
// one, in memory or persisted.
func (p *Pinner) refresh(ctx context.Context, s *sourceState) (pin.Matcher, error) {
	m, err := s.src.Snapshot(ctx)
	now := p.now()
	s.mu.Lock()
	s.attemptAt = now
	if err == nil {
		if m == nil {
			m = pin.NoMatches{}
		}
		s.good, s.goodAt, s.restored, s.lastErr, s.failingSince = m, now, false, nil, time.Time{}
		s.mu.Unlock()
		p.persist(ctx, s, m, now)
		return m, nil
	}
	defer s.mu.Unlock()
	if s.lastErr == nil {
		s.failingSince = now
	}
	s.lastErr = err
	m, uerr := s.usable(now)
	p.logSourceFailure(logctx.For(ctx, p.log), s, err, m != nil, now)
	return m, uerr
}

// persist saves a source's new good snapshot when it differs from the saved one.
func (p *Pinner) persist(ctx context.Context, s *sourceState, m pin.Matcher, takenAt time.Time) {
	codec, ok := s.src.(pin.SnapshotCodec)
	if !ok || p.store.Dir == "" {
		return
	}
	b, err := codec.EncodeSnapshot(m)
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err == nil && bytes.Equal(b, s.saved) {
		return
	}
	if err == nil {
		err = p.store.Save(stateName(s.src), persistedSnapshot{Source: s.src.Name(), TakenAt: takenAt, Snapshot: b})
	}
	if err != nil {
		if s.saveErr == nil {
			logctx.For(ctx, p.log).WithError(err).WithField("source", s.src.Name()).
				Warn("cannot save the last good pins of the source; a restart while it fails would lose them")
		}
		s.saveErr = err
		return
	}
	s.saved, s.saveErr = b, nil
}

// usable returns the matcher to answer with: the last good one unless it is older
// than MaxStaleness while the source fails. Without one, the error says why. Caller
// holds mu.
func (s *sourceState) usable(now time.Time) (pin.Matcher, error) {
	switch {
	case s.good == nil:
		return nil, fmt.Errorf("pin source %s has never answered (%w) and no earlier state of it is saved: %w: %w",
			s.src.Name(), s.lastErr, pin.ErrNoPinState, cerrdefs.ErrUnavailable)
	case s.lastErr == nil:
		return s.good, nil
	}
	if maxAge := s.maxStaleness; maxAge > 0 && now.Sub(s.goodAt) > maxAge {
		return nil, fmt.Errorf("pin source %s fails (%w) and its last good state, taken at %s, is older than the %s allowed: %w: %w",
			s.src.Name(), s.lastErr, pin.FormatTime(s.goodAt), maxAge, pin.ErrNoPinState, cerrdefs.ErrUnavailable)
	}
	return s.good, nil
}

func (p *Pinner) logSourceFailure(log logrus.FieldLogger, s *sourceState, err error, usingLastGood bool, now time.Time) {
	log = log.WithError(err).WithField("source", s.src.Name())
	switch {
	case usingLastGood:
		log.WithField("age", now.Sub(s.goodAt).Round(time.Millisecond).String()).
			Warn("pin source failed, using its last good snapshot")
	case s.good != nil:
		log.WithField("max_staleness", s.maxStaleness.String()).
			Warn("pin source failed and its last good snapshot is too old: refusing to list images until it answers")
	default:
		log.Warn("pin source failed and has no good snapshot: refusing to list images until it answers")
	}
}

// stateLocked is s's state (SourceHealthy, SourceStale, SourceExpired or SourceNeverRead) with
// what usable returns; s.mu is held.
func (s *sourceState) stateLocked(now time.Time) (string, pin.Matcher, error) {
	m, uerr := s.usable(now)
	switch {
	case s.lastErr == nil && s.good != nil && !s.restored:
		return SourceHealthy, m, uerr
	case m != nil:
		return SourceStale, m, uerr
	case s.good != nil:
		return SourceExpired, m, uerr
	default:
		return SourceNeverRead, m, uerr
	}
}

// status reports the state of s for Info: "healthy", "stale" (answering from a last
// good state: the source fails, or has not answered this process yet) with since
// when and why, or "never read".
func (s *sourceState) status(now time.Time) map[string]any {
	s.mu.Lock()
	state, m, uerr := s.stateLocked(now)
	healthy := state == SourceHealthy
	st := map[string]any{
		"name":        s.src.Name(),
		"healthy":     healthy,
		"lastRefresh": pin.FormatTime(s.goodAt),
		"lastAttempt": pin.FormatTime(s.attemptAt),
		"lastError":   pin.ErrString(s.lastErr),
		"usingStale":  !healthy && m != nil,
		"restored":    s.restored,
	}
	st["state"] = state
	switch state {
	case SourceHealthy:
	case SourceStale:
		st["staleSince"] = pin.FormatTime(s.goodAt)
		st["reason"] = pin.ErrString(s.lastErr)
		if s.lastErr == nil {
			st["reason"] = "not read yet by this process; answering from the state saved at " + pin.FormatTime(s.goodAt)
		}
	default:
		st["reason"] = pin.ErrString(uerr)
	}
	s.mu.Unlock()
	s.saveMu.Lock()
	st["saveError"] = pin.ErrString(s.saveErr)
	s.saveMu.Unlock()
	if r, ok := s.src.(pin.StatusReporter); ok {
		st["status"] = r.SourceStatus()
	}
	return st
}
