package pinning

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
)

// startSticky runs the sticky keeper over st until Close.
func (s *Setup) startSticky(st ctrdStore, includeDangling bool, log logrus.FieldLogger) {
	s.sticky = newStickyKeeper(st, s.Pinner, s.restore, includeDangling, log)
	if s.preload != nil {
		s.sticky.reloadFile = s.ReloadArchiveFor
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.sticky.run(ctx, stickyInterval) }()
	s.stopSticky = func() { cancel(); <-done }
	log.WithField("lease", StickyLeaseID).WithField("restore", s.restore).
		Info("sticky pins on: a containerd lease holds the content of pinned images")
}

// startClassic runs the classic keeper until Close.
func (s *Setup) startClassic(w ImageWatcher, log logrus.FieldLogger) {
	var reload archiveReloader
	if s.preload != nil {
		reload = s.ReloadArchiveFor
	}
	s.classic = newClassicKeeper(w, reload, s.Pinner, s.restore, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.classic.run(ctx, stickyInterval) }()
	s.stopSticky = func() { cancel(); <-done }
	log.WithField("restore", s.restore).Info("sticky pins on the classic image store: preloaded images deleted outside the CRI are loaded again, other pinned images reported")
}

// RefusesPinnedRemoval tells whether RemoveImage must refuse pinned images
// (--restore-pinned-images): a removal that the restore would undo.
func (s *Setup) RefusesPinnedRemoval() bool { return s.restore }

// stickyInfo is the sticky pins' state for Info.
func (s *Setup) stickyInfo() any {
	switch {
	case s.sticky != nil:
		return s.sticky.info()
	case s.classic != nil:
		return s.classic.info()
	}
	return map[string]any{"restore": s.restore, "lease": "off: needs the containerd image store and the containerd pin source"}
}

// UnpinHint says how to unpin an image pinned for reasons, for the message of a
// refused removal.
func UnpinHint(reasons []Reason) string {
	var hints []string
	for _, r := range reasons {
		var h string
		switch r.Source {
		case SourceSandboxImage:
			h = "it is the sandbox image (--pod-infra-container-image); choose another"
		case SourceConfigLabel:
			h = "its image config has " + PinnedLabel + "=" + PinnedValue + "; rebuild it without, or run with --pin-from-config-labels=false"
		case SourcePattern:
			h = fmt.Sprintf("remove %q from --pinned-images", r.Detail)
		case SourcePinsFile:
			h = fmt.Sprintf("remove %q from the pins file and send SIGHUP", r.Detail)
		case SourceLabelSelector:
			h = fmt.Sprintf("remove %q from --pinned-image-labels", r.Detail)
		case SourceContainerd:
			h = "remove the label: ctr -n moby images label <record> " + PinnedLabel + "="
		case SourcePreload:
			tb, _, _ := strings.Cut(r.Detail, ": ")
			h = fmt.Sprintf("remove the archive %s from the preload directory", tb)
		default:
			continue
		}
		if !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
	}
	hints = append(hints, "or run with --restore-pinned-images=false")
	return strings.Join(hints, "; ")
}
