package pinning

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Engine is what pinning needs from the container engine; a host program implements
// it with its own engine client.
type Engine interface {
	// EngineInfo reports the engine's image store (from its /info); it is asked
	// only when the containerd record-label source may run.
	EngineInfo(ctx context.Context) (EngineInfo, error)
	// LoadImages loads an image archive (docker load) and returns what it loaded:
	// references, or image IDs for untagged images. It is called only with
	// --preload-images-dir.
	LoadImages(ctx context.Context, archive io.Reader) ([]string, error)
}

// ImageChecker is implemented by an Engine that can tell whether it has an image
// (by reference or ID). With it, an archive of --preload-images-dir whose content
// digest is the one recorded at its last load is not loaded again at start while the
// engine still has its images, and a listed image the engine has is not pulled.
type ImageChecker interface {
	HasImage(ctx context.Context, ref string) (bool, error)
}

// ImagePuller is implemented by an Engine that pulls images with the node's
// registry credentials; with it, the images named by the .txt lists of
// --preload-images-dir are pulled (else they are pinned only).
type ImagePuller interface {
	PullImage(ctx context.Context, ref string) error
}

// EngineInfo are the facts of the engine's /info that pinning uses.
type EngineInfo struct {
	// Driver is the storage driver, for messages.
	Driver string
	// ContainerdStore is true when images live in containerd's image store (see
	// UsesContainerdStore).
	ContainerdStore bool
	// ContainerdAddress is the containerd socket the engine uses (/info's
	// Containerd.Address; "" when unknown).
	ContainerdAddress string
	// ContainerdNamespace is the engine's containerd namespace (/info's
	// Containerd.Namespaces.Containers; "" when unknown).
	ContainerdNamespace string
}

// Host is what pinning takes from the host program's own flags.
type Host struct {
	// SandboxImage is the pod infra image (--pod-infra-container-image); always pinned.
	SandboxImage string
	// RootDirectory is the host's state directory (--cri-dockerd-root-directory);
	// pinning keeps its state in RootDirectory/StateDirName. "" keeps none.
	RootDirectory string
	// DockerEndpoint is the engine's API endpoint (--docker-endpoint): the containerd
	// source stays off for a remote engine unless --containerd-address names a socket.
	DockerEndpoint string
}

// Setup is pinning wired into a host program: the Pinner (Evaluate, Check, Reload,
// Info) and the containerd record-label source when it runs. Close it when done.
type Setup struct {
	*Pinner
	log        logrus.FieldLogger
	containerd *ContainerdSource // nil when off
	keepPins   bool              // --preserve-pin-on-pull
	preload    *preloadDir       // nil without --preload-images-dir
	restore    bool              // --restore-pinned-images
	sticky     *stickyKeeper     // nil when the containerd source is off
	classic    *classicKeeper    // on the classic image store, with an ImageWatcher engine
	stopSticky func()
	stopWatch  func() // the pins files' watcher
}

// Start builds pinning from the flags: it decides whether the containerd
// record-label source runs (asking engine for its image store), reads the pins file,
// starts watching --preload-images-dir (the pins its files gave at earlier starts apply
// at once; archives load and lists pull in the background, through engine, see
// ImageChecker and ImagePuller) and returns the Setup. Flags must have been validated (Flags.Validate). A nil log discards messages.
func Start(ctx context.Context, f Flags, h Host, engine Engine, log logrus.FieldLogger) (*Setup, error) {
	log = logctx.OrDiscard(log)
	s := &Setup{log: log, keepPins: f.PreservePinOnPull, restore: f.RestorePinnedImages, stopSticky: func() {}, stopWatch: func() {}}
	ctrdSource := Disabled(SourceContainerd, "turned off by --pin-from-containerd-labels=false")
	watcher, watches := engine.(ImageWatcher)
	var info EngineInfo
	if f.PinFromContainerdLabels != "false" || watches {
		var err error
		if info, err = engine.EngineInfo(ctx); err != nil {
			return nil, fmt.Errorf("pinning: engine info: %w", err)
		}
	}
	if f.PinFromContainerdLabels != "false" {
		ctrdSource, s.containerd = containerdPins(ctx, &f, h.DockerEndpoint, info, log)
	}
	cfg := f.Config(h.SandboxImage, h.RootDirectory)
	var watch *pinsWatcher
	if cfg.hasPinsFiles() {
		watch = newPinsWatcher(&cfg, pinsPoll, s.reloadLogged, log.WithField("component", "pins-files"))
	}
	p, err := newPinner(cfg, log, f.PreloadImagesDir != "", ctrdSource)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.Pinner = p
	if watch != nil {
		wctx, cancel := context.WithCancel(context.Background())
		done := watch.start(wctx)
		s.stopWatch = func() { cancel(); <-done }
	}
	if f.PreloadImagesDir != "" {
		s.preload = newPreloadDir(f.PreloadImagesDir, engine, p, f.PreloadImageStatusWait, log.WithField("component", "preload"))
		s.preload.start()
	}
	switch {
	case s.containerd != nil:
		s.startSticky(s.containerd.store(), f.PinDanglingRecords, log.WithField("component", "sticky-pins"))
	case watches && !info.ContainerdStore:
		s.startClassic(watcher, log.WithField("component", "sticky-pins"))
	}
	return s, nil
}

// Info is the Pinner's Info with the sticky pins' state ("sticky") and the preload
// directory's ("preloadDir").
func (s *Setup) Info() map[string]any {
	info := s.Pinner.Info()
	info["sticky"] = s.stickyInfo()
	if s.preload != nil {
		info["preloadDir"] = s.preload.info()
	}
	return info
}

// Close stops the sticky pins, then watching the preload directory, and releases the
// containerd connection.
func (s *Setup) Close() error {
	s.stopWatch()
	s.stopSticky()
	if s.preload != nil {
		s.preload.close()
	}
	if s.containerd == nil {
		return nil
	}
	return s.containerd.Close()
}

// PinKeeper returns the containerd source when it runs and --preserve-pin-on-pull
// is on, for the host to wrap its pulls with (KeepPin); else nil.
func (s *Setup) PinKeeper() *ContainerdSource {
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
		s.sticky.trigger()
	}
	if s.classic != nil {
		s.classic.trigger()
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
