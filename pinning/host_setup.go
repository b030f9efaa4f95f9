package pinning

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
	"github.com/sirupsen/logrus"
)

// Info is the Pinner's Info with the sticky pins' state ("sticky") and the preload
// directory's ("preloadDir").
func (s *Setup) Info() map[string]any {
	info := s.Pinner.Info()
	info["sticky"] = s.stickyInfo()
	if s.preload != nil {
		info["preloadDir"] = s.preload.Info()
	}
	return info
}

// Close stops the sticky pins, then watching the preload directory, and releases the
// containerd connection.
func (s *Setup) Close() error {
	s.stopWatch()
	s.stopSticky()
	if s.preload != nil {
		s.preload.Close()
	}
	if s.containerd == nil {
		return nil
	}
	return s.containerd.Close()
}

// PinKeeper returns the containerd source when it runs and --preserve-pin-on-pull
// is on, for the host to wrap its pulls with (KeepPin); else nil.
func (s *Setup) PinKeeper() *containerd.Source {
	if !s.keepPins {
		return nil
	}
	return s.containerd
}

// KeepPin is called before the host pulls ref; the function it returns is called
// once after the pull, whatever its outcome, and puts back the pin of ref's
// containerd record that the pull removed. It does nothing when the containerd
// source is off or --preserve-pin-on-pull=false.
func (s *Setup) KeepPin(ctx context.Context, ref string) func(context.Context) {
	if k := s.PinKeeper(); k != nil {
		return k.KeepPin(ctx, ref)
	}
	return func(context.Context) {}
}

// ReloadLogged re-reads the pins files (Reload) on SIGHUP and logs the outcome: on a
// bad file the previous pins stay in force.
func (s *Setup) ReloadLogged() {
	s.reloadLogged("SIGHUP")
}

// reloadLogged is ReloadLogged for a reason: SIGHUP, or the watcher's.
func (s *Setup) reloadLogged(why string) {
	if err := s.Reload(); err != nil {
		s.log.WithError(err).Error(why + ": pins files not reloaded; the previous pins stay in force")
		return
	}
	s.log.Info(why + ": pins reloaded")
	if s.sticky != nil {
		s.sticky.Trigger()
	}
	if s.classic != nil {
		s.classic.Trigger()
	}
}

// ReloadOnSIGHUP reloads the pins on every SIGHUP (systemd's ExecReload) from now
// until stop is called; SIGHUP no longer ends the process meanwhile. A host whose
// main loop already receives SIGHUP calls ReloadLogged instead.
func (s *Setup) ReloadOnSIGHUP() (stop func()) {
	hup := make(chan os.Signal, 4)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-hup:
				s.ReloadLogged()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}

// WaitPreloaded waits while a file of the preload directory that is not processed
// yet may provide ref: an archive queued or loading that names ref (or whose content
// is not known yet), or a list naming ref whose pull has not been tried or is in its
// first try. It returns when none does, or after --preload-image-status-wait, or when
// ctx ends; it reports whether it waited, so that the caller (ImageStatus of an image
// the engine does not have) looks again. Without a preload directory it returns
// false at once.
func (s *Setup) WaitPreloaded(ctx context.Context, ref string) bool {
	if s.preload == nil {
		return false
	}
	return s.preload.WaitFor(ctx, ref)
}

// ReloadArchiveFor puts back an image that a file of the preload directory provides
// and that was deleted: it loads again the archive that names ref (or pulls ref again
// when a list names it) and returns the file's name. The error wraps errdefs'
// NotFound when no file of the directory provides ref (or there is no directory).
func (s *Setup) ReloadArchiveFor(ctx context.Context, ref string) (string, error) {
	if s.preload == nil {
		return "", fmt.Errorf("no preload directory provides %s: %w", ref, cerrdefs.ErrNotFound)
	}
	return s.preload.ReloadFor(ctx, ref)
}

// PreloadRecords returns what each file of the preload directory pins and where it
// stands (as crictl info shows it), in name order; nil without a directory.
func (s *Setup) PreloadRecords() []Preloaded {
	if s.preload == nil {
		return nil
	}
	return slices.Clone(s.PreloadedNow())
}

// reloader is what the keepers call to load a preloaded image again; nil without a
// preload directory.
func (s *Setup) reloader() sticky.Reloader {
	if s.preload == nil {
		return nil
	}
	return s.ReloadArchiveFor
}

// startSticky runs the sticky keeper over st until Close.
func (s *Setup) startSticky(st containerd.Store, includeDangling bool, log logrus.FieldLogger) {
	s.sticky = sticky.NewKeeper(st, s.Pinner, s.reloader(), s.restore, includeDangling, s.lease, log)
	s.OnPreloadChange(s.sticky.Trigger)
	s.runKeeper(s.sticky.Run)
	log.WithField("lease", s.lease).WithField("restore", s.restore).
		Info("sticky pins on: a containerd lease holds the content of pinned images")
}

// startClassic runs the classic keeper until Close.
func (s *Setup) startClassic(w ImageWatcher, log logrus.FieldLogger) {
	s.classic = sticky.NewClassicKeeper(w, s.reloader(), s.Pinner, s.restore, log)
	s.OnPreloadChange(s.classic.Trigger)
	s.runKeeper(s.classic.Run)
	log.WithField("restore", s.restore).Info("sticky pins on the classic image store: preloaded images deleted outside the CRI are loaded again, other pinned images reported")
}

// runKeeper runs a keeper's loop in the background until Close.
func (s *Setup) runKeeper(run func(ctx context.Context, interval time.Duration)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx, sticky.Interval) }()
	s.stopSticky = func() { cancel(); <-done }
}

// RefusesPinnedRemoval tells whether RemoveImage must refuse pinned images
// (--restore-pinned-images): a removal that the restore would undo.
func (s *Setup) RefusesPinnedRemoval() bool { return s.restore }

// stickyInfo is the sticky pins' state for Info.
func (s *Setup) stickyInfo() any {
	switch {
	case s.sticky != nil:
		return s.sticky.Info()
	case s.classic != nil:
		return s.classic.Info()
	}
	return map[string]any{"restore": s.restore, "lease": "off: needs the containerd image store and the containerd pin source"}
}
