package pinner

import (
	"errors"
	"slices"
	"strings"

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
		defer p.preloadChanged()
	}
	p.preloaded.Store(&files)
}

// OnPreloadChange has f called (it must not block) after every change of what the
// preload files pin, and after the last unread file of a start is read.
func (p *Pinner) OnPreloadChange(f func()) {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	p.preloadHooks = append(p.preloadHooks, f)
}

// preloadChanged calls the hooks of OnPreloadChange; reloadMu is held.
func (p *Pinner) preloadChanged() {
	for _, f := range p.preloadHooks {
		f()
	}
}

// preloadKey names one reference of one preload file.
type preloadKey struct{ tarball, ref string }

// SetPreloadUnread records the preload files that were in the directory at start,
// were never processed before (nothing saved) and whose content is not read yet:
// their images may be in the engine already, so until none is left Evaluate and
// Check report every image pinned (a SourcePreloadUnread reason naming them) rather
// than list one of them unpinned to kubelet's image GC. Over-pinning, not refusing:
// GC only waits (the manifests are read in seconds, before any load), while a
// refused ListImages fails kubelet's image manager and crictl alike. Decide, the
// keepers' view, leaves the reason out: it says only what is known, and the keepers
// release nothing while PreloadUnread names a file.
func (p *Pinner) SetPreloadUnread(files []string) {
	if len(files) == 0 {
		if p.preloadUnread.Swap(nil) != nil {
			p.reloadMu.Lock()
			defer p.reloadMu.Unlock()
			p.preloadChanged() // the keepers may release now
		}
		return
	}
	p.preloadUnread.Store(&files)
}

// PreloadUnread names the files of SetPreloadUnread (nil when none is left).
func (p *Pinner) PreloadUnread() []string {
	if files := p.preloadUnread.Load(); files != nil {
		return *files
	}
	return nil
}

// unreadReason is the reason every image is pinned for while files are unread.
func unreadReason(files []string) pin.Reason {
	return pin.Reason{Source: pin.SourcePreloadUnread,
		Detail: "preload files present at start are not read yet: " + strings.Join(files, ", ")}
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
