package pinning

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/dockpin/cri-dockerd/pinning/sticky"
	"github.com/spf13/pflag"
)

// DefaultRootDirectory is cri-dockerd's --cri-dockerd-root-directory default.
const DefaultRootDirectory = "/var/lib/cri-dockerd"

// LeaseFor is the containerd lease of the instance whose root directory is root: the
// instance owns it and the preload labels it sets (pin.PreloadOwnerLabel), so that
// two instances on one engine never release each other's pins. The default root
// directory (and none) has sticky.DefaultLeaseID, the name of the releases before
// owners; another one has that name followed by a dot and 12 hex digits of the sha256
// of its absolute path.
func LeaseFor(root string) string {
	if root == "" {
		return sticky.DefaultLeaseID
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	if root = filepath.Clean(root); root == DefaultRootDirectory {
		return sticky.DefaultLeaseID
	}
	sum := sha256.Sum256([]byte(root))
	return sticky.DefaultLeaseID + "." + hex.EncodeToString(sum[:6])
}

// StateDirName is where, below the host's root directory (cri-dockerd's
// --cri-dockerd-root-directory), pinning keeps the state that must outlive the
// process: the last good snapshot of each source, the last good pins file, what the
// preload archives pinned.
const StateDirName = "pinning"

// Flags are the pinning command-line options, with their flag names and defaults,
// for a host program (a cri-dockerd) to register on its own flag set with AddFlags.
// The sandbox image and the root directory are the host's own flags: they are
// passed to Start in Host.
type Flags struct {
	// PinnedImages are operator pin patterns (upstream syntax plus *keyword*).
	PinnedImages []string `json:"pinnedImages"`
	// PinnedImageLabels pin images whose config has one of these labels ("key" or "key=value").
	PinnedImageLabels []string `json:"pinnedImageLabels"`
	// PinnedImagesFile is a file of pin patterns, one a line, re-read on SIGHUP.
	PinnedImagesFile string `json:"pinnedImagesFile"`
	// PinnedImagesDir is a directory of pins files, watched and re-read on change and
	// on SIGHUP ("" = none; DefaultPinsDir by default).
	PinnedImagesDir string `json:"pinnedImagesDir"`
	// PreloadImagesDir holds image archives and .txt lists of references, loaded or
	// pulled in the background and pinned, watched while running ("" = none).
	PreloadImagesDir string `json:"preloadImagesDir"`
	// PreloadImageStatusWait bounds how long ImageStatus waits for an image that a
	// pending file of PreloadImagesDir will provide (0 = no wait).
	PreloadImageStatusWait time.Duration `json:"preloadImageStatusWait"`
	// PinFromConfigLabels honours io.cri-containerd.pinned=pinned in image config labels.
	PinFromConfigLabels bool `json:"pinFromConfigLabels"`
	// PinFromContainerdLabels is auto (on when the engine uses the containerd image store), true or false.
	PinFromContainerdLabels string `json:"pinFromContainerdLabels"`
	// ContainerdAddress is the engine's containerd socket ("" = from /info, else well-known paths).
	ContainerdAddress string `json:"containerdAddress"`
	// ContainerdNamespace is the engine's containerd namespace ("" = from /info, else moby).
	ContainerdNamespace string `json:"containerdNamespace"`
	// PinDanglingRecords lets moby-dangling@ records pin their image.
	PinDanglingRecords bool `json:"pinDanglingRecords"`
	// PreservePinOnPull puts back a record's pin label that our own PullImage removed.
	PreservePinOnPull bool `json:"preservePinOnPull"`
	// PinSourceMaxStaleness is how long a failing source's last good pins are used (0 = until it recovers).
	PinSourceMaxStaleness time.Duration `json:"pinSourceMaxStaleness"`
	// ContainerdTimeout bounds each call to containerd.
	ContainerdTimeout time.Duration `json:"containerdTimeout"`
	// RestorePinnedImages puts back pinned images deleted outside the CRI and makes the
	// CRI's RemoveImage refuse pinned images.
	RestorePinnedImages bool `json:"restorePinnedImages"`
}

// DefaultPinsDir is --pinned-images-dir's default: the directory the packages create,
// where configuration management, a DaemonSet or a plain `echo >>` may drop pins
// files without owning the unit's ExecStart.
const DefaultPinsDir = "/etc/cri-dockerd/pins.d"

// DefaultFlags returns the flags' defaults.
func DefaultFlags() Flags {
	return Flags{
		PinnedImagesDir:         DefaultPinsDir,
		PinFromConfigLabels:     true,
		PinFromContainerdLabels: "auto",
		PreservePinOnPull:       true,
		ContainerdTimeout:       2 * time.Second,
		PreloadImageStatusWait:  DefaultPreloadWait,
		RestorePinnedImages:     true,
	}
}

// AddFlags registers the pinning flags on fs, bound to f; f's values are the defaults.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.PinnedImages, "pinned-images", f.PinnedImages, "Images that image garbage collection must keep: repo:tag, repo@digest, a bare repo (every tag), prefix* or *keyword*. Repeatable, comma-separated.")
	fs.StringSliceVar(&f.PinnedImageLabels, "pinned-image-labels", f.PinnedImageLabels, "Pin images whose image config has one of these labels: key or key=value. Repeatable, comma-separated.")
	fs.StringVar(&f.PinnedImagesFile, "pinned-images-file", f.PinnedImagesFile, "A file of pin patterns, one per line (# comments); watched, and re-read when it changes and on SIGHUP.")
	fs.StringVar(&f.PinnedImagesDir, "pinned-images-dir", f.PinnedImagesDir, "A directory of pins files (every file not starting with \".\", in name order, read as --pinned-images-file is); watched, and re-read when it changes and on SIGHUP. A directory that does not exist pins nothing; \"\" reads none.")
	fs.StringVar(&f.PreloadImagesDir, "preload-images-dir", f.PreloadImagesDir, "A directory of image archives (docker save or OCI, .tar[.gz|.xz|.zst|.bz2]) and .txt lists of image references, loaded or pulled in the background and pinned; watched: files added are loaded, files removed unpinned; archives already loaded (same content digest) are not loaded again at restart.")
	fs.DurationVar(&f.PreloadImageStatusWait, "preload-image-status-wait", f.PreloadImageStatusWait, "How long ImageStatus waits for an absent image that a pending file of --preload-images-dir will provide before answering without it; 0 answers at once.")
	fs.BoolVar(&f.PinFromConfigLabels, "pin-from-config-labels", f.PinFromConfigLabels, "Pin images whose image config has the label io.cri-containerd.pinned=pinned.")
	fs.StringVar(&f.PinFromContainerdLabels, "pin-from-containerd-labels", f.PinFromContainerdLabels, "Pin images whose record in the engine's containerd image store has io.cri-containerd.pinned=pinned: auto (when the engine uses the containerd image store), true or false.")
	fs.StringVar(&f.ContainerdAddress, "containerd-address", f.ContainerdAddress, "The engine's containerd socket (default: from the engine's /info, else /run/containerd/containerd.sock, else /var/run/docker/containerd/containerd.sock).")
	fs.StringVar(&f.ContainerdNamespace, "containerd-namespace", f.ContainerdNamespace, "The engine's containerd namespace (default: from the engine's /info, else moby).")
	fs.BoolVar(&f.PinDanglingRecords, "pin-dangling-records", f.PinDanglingRecords, "Let labelled moby-dangling@ records pin their (untagged) image.")
	fs.BoolVar(&f.PreservePinOnPull, "preserve-pin-on-pull", f.PreservePinOnPull, "When our PullImage re-pulls a tag whose containerd record was pinned, put the pin label back (the engine's pull replaces record labels).")
	fs.DurationVar(&f.PinSourceMaxStaleness, "pin-source-max-staleness", f.PinSourceMaxStaleness, "How long the last good pins of a failing source (containerd) keep being used; 0 keeps them until it recovers.")
	fs.BoolVar(&f.RestorePinnedImages, "restore-pinned-images", f.RestorePinnedImages, "Put back pinned images deleted outside the CRI (docker rmi, docker image prune, ctr images rm): from the content a containerd lease holds on the containerd image store, by loading their archive again for preloaded images. RemoveImage of a pinned image then fails (FailedPrecondition); false removes it as asked.")
	fs.DurationVar(&f.ContainerdTimeout, "containerd-timeout", f.ContainerdTimeout, "Bound on each call to containerd; a slower answer counts as a failure and the last good pins are used.")
}

// Validate checks the flags, every pattern and selector included, and the host's
// sandbox image as pinning reads it; it returns all problems at once.
func (f *Flags) Validate(sandboxImage string) error {
	var errs []error
	switch f.PinFromContainerdLabels {
	case "auto", "true", "false":
	default:
		errs = append(errs, fmt.Errorf("--pin-from-containerd-labels %q: must be auto, true or false", f.PinFromContainerdLabels))
	}
	if f.PreloadImageStatusWait < 0 {
		errs = append(errs, fmt.Errorf("--preload-image-status-wait %s: must not be negative", f.PreloadImageStatusWait))
	}
	if f.ContainerdTimeout <= 0 || f.PinSourceMaxStaleness < 0 {
		errs = append(errs, errors.New("--containerd-timeout must be positive and --pin-source-max-staleness not negative"))
	}
	if err := f.Config(sandboxImage, "").Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Config returns the pinning configuration of the flags for a host whose sandbox
// image and root directory are these; state is kept in rootDir/StateDirName ("" rootDir
// keeps none).
func (f *Flags) Config(sandboxImage, rootDir string) Config {
	c := pinner.DefaultConfig()
	c.SandboxImage = sandboxImage
	c.ConfigLabels = f.PinFromConfigLabels
	c.Patterns = f.PinnedImages
	c.LabelSelectors = f.PinnedImageLabels
	c.PinsFile = f.PinnedImagesFile
	c.PinsDir = f.PinnedImagesDir
	c.MaxStaleness = f.PinSourceMaxStaleness
	if rootDir != "" {
		c.StateDir = filepath.Join(rootDir, StateDirName)
	}
	return c
}
