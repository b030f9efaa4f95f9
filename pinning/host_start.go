package pinning

import (
	"context"
	"fmt"
	"io"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/dockpin/cri-dockerd/pinning/preload"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
)

// Engine is what pinning needs from the container engine; a host program implements
// it with its own engine client.
type Engine interface {
	// EngineInfo reports the engine's image store (from its /info); it is asked at
	// Start (with the containerd source off, only to give back an earlier start's
	// lease: its failure does not fail Start) and by Release.
	EngineInfo(ctx context.Context) (EngineInfo, error)
	// LoadImages loads an image archive (docker load) and returns what it loaded:
	// references, or image IDs for untagged images. It is called only with
	// --preload-images-dir.
	LoadImages(ctx context.Context, archive io.Reader) ([]string, error)
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
	containerd *containerd.Source    // nil when off
	keepPins   bool                  // --preserve-pin-on-pull
	preload    *preload.Dir          // nil without --preload-images-dir
	restore    bool                  // --restore-pinned-images
	sticky     *sticky.Keeper        // nil when the containerd source is off
	classic    *sticky.ClassicKeeper // on the classic image store, with an ImageWatcher engine
	stopSticky func()
	stopWatch  func() // the pins files' watcher
	lease      string // LeaseFor the host's root directory
}

// Start builds pinning from the flags: it decides whether the containerd
// record-label source runs (asking engine for its image store), reads the pins file,
// starts watching --preload-images-dir (the pins its files gave at earlier starts apply
// at once; archives load and lists pull in the background, through engine, see
// ImageChecker and ImagePuller) and returns the Setup. Flags must have been validated (Flags.Validate). A nil log discards messages.
func Start(ctx context.Context, f Flags, h Host, engine Engine, log logrus.FieldLogger) (*Setup, error) {
	log = logctx.OrDiscard(log)
	s := &Setup{log: log, keepPins: f.PreservePinOnPull, restore: f.RestorePinnedImages, stopSticky: func() {}, stopWatch: func() {},
		lease: LeaseFor(h.RootDirectory)}
	ctrdSource := pin.Disabled(pin.SourceContainerd, "turned off by --pin-from-containerd-labels=false")
	watcher, watches := engine.(ImageWatcher)
	var info EngineInfo
	if f.PinFromContainerdLabels != "false" || watches {
		var err error
		if info, err = engine.EngineInfo(ctx); err != nil {
			return nil, fmt.Errorf("pinning: engine info: %w", err)
		}
	} else if engine != nil {
		// Only to give back an earlier start's lease: an engine that cannot say is
		// not a reason to refuse the start.
		info, _ = engine.EngineInfo(ctx)
	}
	if f.PinFromContainerdLabels != "false" {
		ctrdSource, s.containerd = containerdPins(ctx, &f, h.DockerEndpoint, info, log)
	} else if info.ContainerdStore {
		releaseWhenOff(f, h, info, log.WithField("component", "sticky-pins"))
	}
	cfg := f.Config(h.SandboxImage, h.RootDirectory)
	var watch *pinsWatcher
	if cfg.HasPinsFiles() {
		watch = newPinsWatcher(&cfg, pinsPoll, s.reloadLogged, log.WithField("component", "pins-files"))
	}
	newPinner := pinner.New
	if f.PreloadImagesDir != "" {
		newPinner = pinner.NewWatched
	}
	p, err := newPinner(cfg, log, ctrdSource)
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
		s.preload = preload.New(f.PreloadImagesDir, engine, p, p.StateStore(), f.PreloadImageStatusWait, log.WithField("component", "preload"))
		s.preload.Start()
	}
	switch {
	case s.containerd != nil:
		s.startSticky(s.containerd.Store(), f.PinDanglingRecords, log.WithField("component", "sticky-pins"))
	case watches && !info.ContainerdStore:
		s.startClassic(watcher, log.WithField("component", "sticky-pins"))
	}
	return s, nil
}
