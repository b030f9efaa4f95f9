package pinning

import (
	"context"
	"maps"
	"strings"
)

// preloadTarballs are the files of the preload directory that are in force: those
// present now (loaded, pending or failed) and those whose references the pins hold.
func (p *Pinner) preloadTarballs() map[string]bool {
	out := map[string]bool{}
	for _, l := range p.preloadedNow() {
		out[l.Tarball] = true
	}
	set := p.set.Load()
	for _, pat := range set.patterns[set.fileEnd:] {
		if tb, _, ok := strings.Cut(pat.text, ": "); ok {
			out[tb] = true
		}
	}
	return out
}

// preloadTarball returns the archive a preload reason names ("" when none does).
func preloadTarball(reasons []Reason) string {
	for _, r := range reasons {
		if r.Source == SourcePreload {
			if tb, _, ok := strings.Cut(r.Detail, ": "); ok {
				return tb
			}
		}
	}
	return ""
}

// isPreloadMirror tells whether a record's pin label is the one labelPreloaded set to
// mirror a preload pin (for ctr, nerdctl and the time we do not run): it does not
// pin by itself here.
func isPreloadMirror(labels map[string]string) bool {
	return labels[preloadMarkerLabel] != ""
}

// labelPreloaded makes the records of preloaded images say so, for ctr and nerdctl
// and for the time we do not run: PreloadArchiveLabel names the archive, and
// PinnedLabel pins (set by us only when missing, noted by preloadMarkerLabel). The
// labels of archives no longer in the directory are removed, only those we set.
// Failures are logged; the next reconcile tries again.
func (k *stickyKeeper) labelPreloaded(ctx context.Context, targets map[string]*stickyTarget, order []string) {
	present := k.p.preloadTarballs()
	for _, d := range order {
		t := targets[d]
		tarball := preloadTarball(t.reasons)
		for i, r := range t.present {
			if strings.HasPrefix(r.Name, DanglingPrefix) {
				continue
			}
			set, del := preloadLabelChange(r.Labels, tarball, present)
			if len(set) == 0 && len(del) == 0 {
				continue
			}
			if err := k.st.SetLabels(ctx, r.Name, r.Target, set, del); err != nil {
				k.log.WithError(err).WithField("record", r.Name).Warn("sticky pins: cannot update the preload labels of an image record")
				continue
			}
			labels := maps.Clone(r.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			maps.Copy(labels, set)
			for _, key := range del {
				delete(labels, key)
			}
			t.present[i].Labels = labels
		}
	}
}

// preloadLabelChange returns the labels to set and to remove on a record with labels
// whose image the archive tarball pins ("" = none), the archives in force being present.
func preloadLabelChange(labels map[string]string, tarball string, present map[string]bool) (set map[string]string, del []string) {
	cur, ours := labels[PreloadArchiveLabel]
	marked := labels[preloadMarkerLabel] != ""
	switch {
	case tarball != "":
		set = map[string]string{}
		if cur != tarball {
			set[PreloadArchiveLabel] = tarball
		}
		if labels[PinnedLabel] != PinnedValue {
			set[PinnedLabel], set[preloadMarkerLabel] = PinnedValue, "true"
		}
		if len(set) == 0 {
			set = nil
		}
	case ours && !present[cur]:
		del = []string{PreloadArchiveLabel}
		if marked {
			del = append(del, preloadMarkerLabel, PinnedLabel)
		}
	}
	return set, del
}
