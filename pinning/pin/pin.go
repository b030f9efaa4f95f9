package pin

import (
	"fmt"
	"slices"
	"strings"
)

// Image is the view of one engine image that pinning decisions look at.
type Image struct {
	// ID is the engine image ID, "sha256:<hex>".
	ID string
	// RepoTags are the tags as Docker reports them, in familiar form ("busybox:1.36");
	// "<none>:<none>" entries are ignored.
	RepoTags []string
	// RepoDigests are the digests as Docker reports them ("busybox@sha256:...");
	// "<none>@<none>" entries are ignored.
	RepoDigests []string
	// Labels are the image config labels (Config.Labels).
	Labels map[string]string
}

// Reason says why an image is pinned.
type Reason struct {
	// Source is one of the Source* constants.
	Source string `json:"source"`
	// Detail is what matched: the pattern, "label k=v", the record name, ...
	Detail string `json:"detail"`
}

// Reason sources, in the order reasons are reported.
const (
	// SourceSandboxImage pins the pod infra image.
	SourceSandboxImage = "sandbox-image"
	// SourceConfigLabel pins images whose config labels carry PinnedLabel=PinnedValue.
	SourceConfigLabel = "config-label"
	// SourcePattern pins images matching --pinned-images.
	SourcePattern = "pinned-images"
	// SourcePinsFile pins images matching a pattern of --pinned-images-file.
	SourcePinsFile = "pinned-images-file"
	// SourceLabelSelector pins images whose config labels match --pinned-image-labels.
	SourceLabelSelector = "pinned-image-labels"
	// SourceContainerd pins images whose containerd records carry the pinned label.
	SourceContainerd = "containerd-label"
	// SourcePreload pins the images loaded from the preload directory at this start.
	SourcePreload = "preload"
	// SourcePreloadUnread pins every image while preload files present at start are
	// not read yet (Detail names them): what they hold is not known.
	SourcePreloadUnread = "preload-unread"
)

const (
	// PinnedLabel is the label that pins an image (containerd's name).
	PinnedLabel = "io.cri-containerd.pinned"
	// PinnedValue is the only value of PinnedLabel that pins.
	PinnedValue = "pinned"
	// MisspelledLabel is a frequent misspelling of PinnedLabel; it does not pin.
	MisspelledLabel = "io.cri.containerd.pinned"
)

// DanglingPrefix names the records the engine keeps for untagged images.
const DanglingPrefix = "moby-dangling@"

const (
	// PreloadArchiveLabel on a containerd record names the preload archive its image
	// was loaded from; set (with PinnedLabel) on the records of preloaded images.
	PreloadArchiveLabel = "io.dockpin.preload.archive"
	// PreloadMarkerLabel says that we set PinnedLabel on a preloaded image's record
	// (it did not carry it before), so that removing the archive removes it again.
	PreloadMarkerLabel = "io.dockpin.preload.pinned-label"
	// PreloadOwnerLabel names the instance (its lease) that set the preload labels of
	// a record: another instance on the same engine leaves them alone.
	PreloadOwnerLabel = "io.dockpin.preload.owner"
)

// IsPreloadMirror tells whether a record's pin label is the one labelPreloaded set to
// mirror a preload pin (for ctr, nerdctl and the time we do not run): it does not
// pin by itself here.
func IsPreloadMirror(labels map[string]string) bool {
	return labels[PreloadMarkerLabel] != ""
}

// PreloadTarball returns the archive a preload reason names ("" when none does).
func PreloadTarball(reasons []Reason) string {
	for _, r := range reasons {
		if r.Source == SourcePreload {
			if tb, _, ok := strings.Cut(r.Detail, ": "); ok {
				return tb
			}
		}
	}
	return ""
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
		case SourcePreloadUnread:
			h = "wait: every image is pinned until the preload files present at start are read (seconds; crictl info shows them)"
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
