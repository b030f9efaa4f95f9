package pinner

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
)

// PreloadStateName is the name of the preload archives' state file.
const PreloadStateName = "preload"

// resolvePreloaded completes what the preload archives pin at this start with the
// state saved at earlier ones, and saves the result. An archive that is still in the
// directory keeps its pins even when it failed to load and could not be read (from
// the references saved at its last good load); only an archive removed from the
// directory drops its pins (it is not in loaded, so not in the new state).
func resolvePreloaded(store statefile.Store, loaded []Preloaded, log logrus.FieldLogger) []Preloaded {
	var saved []Preloaded
	if _, err := store.Load(PreloadStateName, &saved); err != nil {
		log.WithError(err).Warn("preload: cannot read what the archives pinned at earlier starts")
	}
	savedRefs := make(map[string][]string, len(saved))
	for _, s := range saved {
		savedRefs[s.Tarball] = s.Refs
	}
	out := make([]Preloaded, 0, len(loaded))
	for _, l := range loaded {
		if l.Failed != "" && len(l.Refs) == 0 {
			entry := log.WithField("tarball", l.Tarball).WithField("load_error", l.Failed)
			refs, ok := savedRefs[l.Tarball]
			if !ok {
				entry.Error("preload: archive neither loaded nor readable, and never loaded before: it pins nothing")
				out = append(out, l)
				continue
			}
			l.Refs, l.Origin = refs, OriginSaved
			entry.WithField("images", refs).Warn("preload: archive neither loaded nor readable: its images stay pinned as at its last good load")
		}
		out = append(out, l)
	}
	var keep []Preloaded
	for _, l := range out {
		if len(l.Refs) > 0 {
			keep = append(keep, Preloaded{Tarball: l.Tarball, Refs: l.Refs})
		}
	}
	if keep == nil && len(saved) == 0 {
		return out // nothing to save, nothing saved: leave no empty state file behind
	}
	if err := store.Save(PreloadStateName, keep); err != nil {
		log.WithError(err).Warn("preload: cannot save what the archives pin; a failed load at the next start may unpin them")
	}
	return out
}

// PreloadedNow returns what the preload files pin now.
func (p *Pinner) PreloadedNow() []Preloaded {
	if l := p.preloaded.Load(); l != nil {
		return *l
	}
	return nil
}

// SetPreloaded puts what the preload files pin now into force (the preload
// directory's watcher calls it at every change). A reference that does not parse is
// logged and skipped; the others stay pinned. Each (file, reference) is parsed once:
// the watcher publishes everything at every change (each image of a list pulled), so
// parsing again would make a list's pulls cost the square of its length.
func (p *Pinner) SetPreloaded(files []Preloaded) {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	parsed := make(map[preloadKey]pin.Pattern, len(p.preloadParsed))
	var patterns []pin.Pattern
	var order []preloadKey
	for _, f := range files {
		var bad []error
		for _, ref := range f.Refs {
			k := preloadKey{f.Tarball, ref}
			order = append(order, k)
			pat, ok := p.preloadParsed[k]
			if !ok {
				got, err := parsePreloaded([]Preloaded{{Tarball: f.Tarball, Refs: []string{ref}}})
				if err != nil {
					bad = append(bad, err)
					continue
				}
				pat = got[0]
			}
			parsed[k] = pat
			patterns = append(patterns, pat)
		}
		if len(bad) > 0 {
			p.log.WithError(errors.Join(bad...)).WithField("file", f.Tarball).Error("preload: reference skipped")
		}
	}
	p.preloadParsed = parsed // only the current ones: bounded by what the files pin
	// A change of state alone (an image of a list pulled) pins the same references:
	// the match set stands.
	if !slices.Equal(order, p.preloadOrder) {
		p.preloadOrder = order
		p.set.Store(newMatchSet(p.rules, p.set.Load().file, patterns))
	}
	p.preloaded.Store(&files)
}

// preloadKey names one reference of one preload file.
type preloadKey struct{ tarball, ref string }

// SetPreloadBlock records the preload files that were in the directory at start, were
// never processed before (nothing saved) and whose content is not known yet: until
// none is left, Evaluate refuses, as it does for a source that never answered, since
// their images may be in the engine already and must not be listed unpinned.
func (p *Pinner) SetPreloadBlock(files []string) {
	if len(files) == 0 {
		p.preloadBlock.Store(nil)
		return
	}
	p.preloadBlock.Store(&files)
}

// preloadErr is Evaluate's error while SetPreloadBlock's files are not read yet.
func (p *Pinner) preloadErr() error {
	files := p.preloadBlock.Load()
	if files == nil {
		return nil
	}
	return fmt.Errorf("preload files present at start are not read yet, so what they pin is not known (%s): %w: %w",
		strings.Join(*files, ", "), pin.ErrNoPinState, cerrdefs.ErrUnavailable)
}

// PreloadTarballs are the files of the preload directory that are in force: those
// present now (loaded, pending or failed) and those whose references the pins hold.
func (p *Pinner) PreloadTarballs() map[string]bool {
	out := map[string]bool{}
	for _, l := range p.PreloadedNow() {
		out[l.Tarball] = true
	}
	set := p.set.Load()
	for _, pat := range set.preload {
		if tb, _, ok := strings.Cut(pat.String(), ": "); ok {
			out[tb] = true
		}
	}
	return out
}
