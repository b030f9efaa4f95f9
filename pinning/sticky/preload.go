package sticky

import (
	"context"
	"maps"
	"strings"

	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// labelPreloaded makes the records of preloaded images say so, for ctr and nerdctl
// and for the time we do not run: PreloadArchiveLabel names the archive, and
// PinnedLabel pins (set by us only when missing, noted by PreloadMarkerLabel). The
// labels of archives no longer in the directory are removed, only those we set.
// Failures are logged; the next reconcile tries again.
func (k *Keeper) labelPreloaded(ctx context.Context, targets map[string]*stickyTarget, order []string) {
	present := k.p.PreloadTarballs()
	for _, d := range order {
		t := targets[d]
		tarball := pin.PreloadTarball(t.reasons)
		for i, r := range t.present {
			if strings.HasPrefix(r.Name, pin.DanglingPrefix) {
				continue
			}
			set, del := preloadLabelChange(r.Labels, tarball, present, k.lease)
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
// whose image the archive tarball pins ("" = none), the archives in force being
// present, for the instance owner (its lease). The labels another instance set
// (PreloadOwnerLabel names it) are left alone; those set before owners were recorded
// are taken as ours.
func preloadLabelChange(labels map[string]string, tarball string, present map[string]bool, owner string) (set map[string]string, del []string) {
	if o := labels[pin.PreloadOwnerLabel]; o != "" && o != owner {
		return nil, nil
	}
	cur, ours := labels[pin.PreloadArchiveLabel]
	marked := labels[pin.PreloadMarkerLabel] != ""
	switch {
	case tarball != "":
		set = map[string]string{}
		if cur != tarball {
			set[pin.PreloadArchiveLabel] = tarball
		}
		if labels[pin.PreloadOwnerLabel] != owner {
			set[pin.PreloadOwnerLabel] = owner
		}
		if labels[pin.PinnedLabel] != pin.PinnedValue {
			set[pin.PinnedLabel], set[pin.PreloadMarkerLabel] = pin.PinnedValue, "true"
		}
		if len(set) == 0 {
			set = nil
		}
	case ours && !present[cur]:
		del = []string{pin.PreloadArchiveLabel}
		if _, ok := labels[pin.PreloadOwnerLabel]; ok {
			del = append(del, pin.PreloadOwnerLabel)
		}
		if marked {
			del = append(del, pin.PreloadMarkerLabel, pin.PinnedLabel)
		}
	}
	return set, del
}
