package pinner

import (
	"cmp"
	"time"
)

// The states of a pin source, as crictl info and the metrics name them.
const (
	// SourceHealthy: the source answered its last read.
	SourceHealthy = "healthy"
	// SourceStale: it fails (or has not answered this process yet) and its last good state answers.
	SourceStale = "stale"
	// SourceExpired: its last good state is older than --pin-source-max-staleness.
	SourceExpired = "expired"
	// SourceNeverRead: it never answered and nothing was saved: ListImages refuses.
	SourceNeverRead = "never read"
)

// PreloadPinsNothing is Health's origin of a preload archive that neither loaded nor was
// ever loaded before: it pins nothing.
const PreloadPinsNothing = "none"

// SourceStates lists every state a source can be in.
func SourceStates() []string {
	return []string{SourceHealthy, SourceStale, SourceExpired, SourceNeverRead}
}

// Health is pinning's state in numbers, for metrics: the most recent evaluation (the
// last ListImages or ImageStatus) and every extra source.
type Health struct {
	// EvaluatedAt is when the most recent evaluation ran; zero before the first.
	EvaluatedAt time.Time
	// Images is the number of images it evaluated; Pinned those pinned by any source.
	Images, Pinned int
	// PinnedBySource counts pinned images per source (an image once for each of its sources).
	PinnedBySource map[string]int
	// Sources is the state of every extra source (containerd labels, say).
	Sources []SourceHealth
	// PreloadArchives and PreloadRefs count the files of the preload directory
	// (archives and lists) and the references they pin, by origin (OriginLoaded,
	// OriginManifest: not loaded or not yet, OriginSaved: not loaded yet or unreadable,
	// OriginListed: a list, PreloadPinsNothing: nothing, or nothing yet).
	PreloadArchives, PreloadRefs map[string]int
	// PreloadStates counts the files by state (PreloadPending, PreloadLoaded,
	// PreloadFailed, ...); PreloadLoadFailures sums the failed loads in a row of the
	// failing archives (each is retried with backoff); PreloadUnread counts the files
	// present at start not read yet (every image is pinned meanwhile).
	PreloadStates       map[string]int
	PreloadLoadFailures int
	PreloadUnread       int
}

// SourceHealth is one source's state.
type SourceHealth struct {
	// Name is the source's name, as in crictl info.
	Name string
	// State is one of SourceStates.
	State string
	// LastRefresh is the time of its last good answer (or of the state saved then); zero: never.
	LastRefresh time.Time
}

// Health returns the state of pinning now.
func (p *Pinner) Health() Health {
	now := p.now()
	h := Health{PinnedBySource: map[string]int{}, PreloadArchives: map[string]int{}, PreloadRefs: map[string]int{},
		PreloadStates: map[string]int{}, PreloadUnread: len(p.PreloadUnread())}
	for _, pre := range p.PreloadedNow() {
		origin := cmp.Or(pre.Origin, PreloadPinsNothing)
		h.PreloadArchives[origin]++
		h.PreloadRefs[origin] += len(pre.Refs)
		if pre.State != "" {
			h.PreloadStates[pre.State]++
		}
		h.PreloadLoadFailures += pre.LoadFailures
	}
	if st := p.lastEval.Load(); st != nil {
		h.EvaluatedAt, h.Images, h.Pinned = st.at, st.images, st.pinned
		for k, v := range st.bySource {
			h.PinnedBySource[k] = v
		}
	}
	for _, s := range p.loadSources() {
		s.mu.Lock()
		state, _, _ := s.stateLocked(now)
		h.Sources = append(h.Sources, SourceHealth{Name: s.src.Name(), State: state, LastRefresh: s.goodAt})
		s.mu.Unlock()
	}
	return h
}
