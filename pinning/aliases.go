package pinning

import (
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/dockpin/cri-dockerd/pinning/preload"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
)

// The names a host program uses, from the packages that define them. A host needs
// only this package; programs that evaluate pins themselves (the pin proxy) use pin
// and pinner directly.
type (
	// Image is the view of one engine image that pinning decisions look at.
	Image = pin.Image
	// Reason says why an image is pinned.
	Reason = pin.Reason
	// Pinner decides whether images are pinned and why.
	Pinner = pinner.Pinner
	// Config is the Pinner's configuration (Flags.Config builds it).
	Config = pinner.Config
	// Preloaded is what one file of the preload directory pins and where it stands.
	Preloaded = pinner.Preloaded
	// ImageChecker is the optional part of an Engine that tells whether it has an image.
	ImageChecker = preload.ImageChecker
	// ImagePuller is the optional part of an Engine that pulls the listed images.
	ImagePuller = preload.ImagePuller
	// ImageWatcher is the optional part of an Engine that reports image deletions on
	// the classic image store.
	ImageWatcher = sticky.ImageWatcher
	// Released is what Release gave back.
	Released = sticky.Released
)

const (
	// DefaultSandboxImage is upstream cri-dockerd's default pod infra image.
	DefaultSandboxImage = pinner.DefaultSandboxImage
	// DefaultPreloadWait is --preload-image-status-wait's default.
	DefaultPreloadWait = preload.DefaultWait
)

// CheckPinsFile validates the pins file at path as a reload would read it, without
// touching a running daemon. It returns the number of patterns, or an error naming
// each bad line.
func CheckPinsFile(path string) (int, error) { return pin.CheckPinsFile(path) }

// CheckPins validates the pins file (file, "" = none) and the pins directory (dir,
// "" = none) as a reload reads them: the files read and the number of patterns, or an
// error naming each bad file and line.
func CheckPins(file, dir string) (files []string, patterns int, err error) {
	return pin.CheckPins(file, dir)
}
