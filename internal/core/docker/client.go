package docker

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/docker/docker/api/types/versions"
)

// MinAPIVersion is the oldest Engine API this shim accepts (Docker 23), as upstream cri-dockerd.
const MinAPIVersion = "1.42"

// ErrRegistryUnreachable marks a pull that failed because the registry could not be
// reached (connection refused, DNS failure, timeout). It is always joined with
// errdefs.ErrUnavailable.
var ErrRegistryUnreachable = errors.New("registry unreachable")

// Image is one engine image as the CRI image service sees it.
type Image struct {
	// ID is the engine's image ID ("sha256:<hex>").
	ID string
	// RepoTags are the familiar references ("busybox:1.36"); never "<none>:<none>".
	RepoTags []string
	// RepoDigests are the familiar digested references ("busybox@sha256:..."); never "<none>@<none>".
	RepoDigests []string
	// Size is the image size in bytes as the engine reports it.
	Size int64
	// Labels are the image config labels (Config.Labels).
	Labels map[string]string
	// User is the config user ("", "1000", "www-data:1004"); only filled by InspectImage.
	User string
}

// Version is the engine's version information.
type Version struct {
	// Version is the engine version ("29.8.1").
	Version string
	// APIVersion is the highest API version the engine speaks.
	APIVersion string
	// NegotiatedAPIVersion is the API version this client uses with the engine.
	NegotiatedAPIVersion string
}

// Info is the subset of the engine's /info that this shim uses.
type Info struct {
	// Driver is the storage driver ("overlay2", "overlayfs" with the containerd store).
	Driver string
	// DriverStatus are the driver's key/value pairs.
	DriverStatus [][2]string
	// ContainerdStore is true when images live in containerd's image store.
	ContainerdStore bool
	// ContainerdAddress is the containerd socket the engine uses ("" before API 1.46).
	ContainerdAddress string
	// ContainerdNamespace is the containerd namespace of the engine's containers ("" before API 1.46).
	ContainerdNamespace string
	// DockerRootDir is the engine's data root.
	DockerRootDir string
	// Experimental is true when the daemon runs with experimental features (needed
	// for checkpoints).
	Experimental bool
	// CgroupDriver is "cgroupfs" or "systemd".
	CgroupDriver string
	// Runtimes are the names of the OCI runtimes the engine is configured with.
	Runtimes []string
	// DefaultRuntime is the runtime containers get unless they name another.
	DefaultRuntime string
	// LoggingDriver is the log driver containers get unless they name another.
	LoggingDriver string
	// CDISpecDirs are the directories the engine reads CDI specs from (none: CDI is off).
	CDISpecDirs []string
	// CDIDevices are the CDI devices the engine has discovered there, by fully qualified
	// name; only reported from API 1.50 (Docker 28.3), see CDIDevicesReported.
	CDIDevices []string
	// CDIDevicesReported tells whether the engine reports its CDI devices.
	CDIDevicesReported bool
}

// AuthConfig carries registry credentials for one pull.
type AuthConfig struct {
	Username      string
	Password      string
	Auth          string
	ServerAddress string
	IdentityToken string
	RegistryToken string
}

// PullOptions tune one pull.
type PullOptions struct {
	// Auth is nil for anonymous pulls.
	Auth *AuthConfig
	// ProgressDeadline cancels the pull when the engine reports no progress for this long (0 = never).
	ProgressDeadline time.Duration
}

// ImageFsUsage is how much the engine's images, and its containers' writable layers,
// use of its filesystem. The engine keeps both under its data root (the containerd
// store in containerd's snapshotter, which the engine does not name).
type ImageFsUsage struct {
	// Mountpoint is the directory holding the engine's images and writable layers.
	Mountpoint string
	// UsedBytes is the size of all image layers.
	UsedBytes uint64
	// ContainersUsedBytes is the size of all containers' writable layers.
	ContainersUsedBytes uint64
	// InodesUsed is the inodes in use on the filesystem holding Mountpoint (its statfs,
	// not the layers' own count, which the engine does not report); 0 when the
	// filesystem does not count inodes.
	InodesUsed uint64
}

// ImageEvent is one image event from the engine's event stream.
type ImageEvent struct {
	// Action is what happened: pull, tag, untag, delete, import, load, prune, ...
	Action string
	// ID is the event's actor: the image ID (a reference for some actions).
	ID string
	// Name is the reference the event is about, when it names one.
	Name string
	// Time is when the engine recorded the event.
	Time time.Time
}

// Client is what package core needs from Docker Engine. Every method takes the
// request's context and returns errors classified with containerd errdefs.
type Client interface {
	Containers

	Version(ctx context.Context) (Version, error)
	Info(ctx context.Context) (Info, error)
	Ping(ctx context.Context) error
	// ListImages lists all tagged and untagged top-level images.
	ListImages(ctx context.Context) ([]Image, error)
	// InspectImage resolves a reference (name, name:tag, name@digest or ID) to an image;
	// NotFound when there is none.
	InspectImage(ctx context.Context, ref string) (Image, error)
	// PullImage pulls ref and returns when the pull finished.
	PullImage(ctx context.Context, ref string, opts PullOptions) error
	// RemoveImage removes the image ref resolves to with every tag and digest that
	// references it (children pruned, not forced), reading the engine afresh; NotFound
	// when there is no such image.
	RemoveImage(ctx context.Context, ref string) error
	ImageFsUsage(ctx context.Context) (ImageFsUsage, error)
	// LoadImages loads a docker save or OCI archive (compressed or not) and returns the
	// references it loaded (image IDs for untagged images); InvalidArgument when the
	// engine refuses the archive.
	LoadImages(ctx context.Context, archive io.Reader) ([]string, error)
	// ImageEvents streams image events from since (the engine replays recent ones) until
	// ctx ends or the stream breaks; the error channel then receives why.
	ImageEvents(ctx context.Context, since time.Time) (<-chan ImageEvent, <-chan error)
}

// APIAtLeast tells whether the negotiated API version is at least api ("1.44").
func (v Version) APIAtLeast(api string) bool {
	return !versions.LessThan(v.NegotiatedAPIVersion, api)
}
