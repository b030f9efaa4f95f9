package preload

import (
	"context"
	"io"

	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// Loader is what the preload directory needs from the engine: loading an image
// archive (docker load). It returns what the engine loaded: references, or image IDs
// for untagged images.
type Loader interface {
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

// Pins is where the directory publishes what its files pin (a *pinner.Pinner).
type Pins interface {
	// SetPreloaded puts what the files pin now into force.
	SetPreloaded(files []pinner.Preloaded)
	// SetPreloadUnread names the files present at start whose pins are not known yet;
	// while any is left, every image is pinned.
	SetPreloadUnread(files []string)
}
