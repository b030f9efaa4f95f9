package core

import (
	"fmt"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/pinning"
)

// imageRef validates the image named by a CRI ImageSpec and returns it.
func imageRef(spec *runtimeapi.ImageSpec) (string, error) {
	if spec == nil || strings.TrimSpace(spec.Image) == "" {
		return "", fmt.Errorf("image reference is empty: %w", cerrdefs.ErrInvalidArgument)
	}
	ref := spec.Image
	if _, err := reference.ParseAnyReference(ref); err != nil {
		return "", fmt.Errorf("invalid image reference %q: %w: %w", ref, err, cerrdefs.ErrInvalidArgument)
	}
	return ref, nil
}

func pinningImage(img *docker.Image) pinning.Image {
	return pinning.Image{ID: img.ID, RepoTags: img.RepoTags, RepoDigests: img.RepoDigests, Labels: img.Labels}
}

// criImage converts an engine image to its CRI form.
func criImage(img *docker.Image, pinned bool) *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id:          img.ID,
		RepoTags:    img.RepoTags,
		RepoDigests: img.RepoDigests,
		Size:        uint64(max(img.Size, 0)),
		Pinned:      pinned,
	}
	uid, name := splitUser(img.User)
	if uid != nil {
		out.Uid = &runtimeapi.Int64Value{Value: *uid}
	}
	out.Username = name
	return out
}

// splitUser turns an image config user ("1000", "www-data:50", "1000:1000") into a
// numeric uid or a user name, as kubelet expects for runAsNonRoot checks.
func splitUser(user string) (*int64, string) {
	u, _, _ := strings.Cut(user, ":")
	if u == "" {
		return nil, ""
	}
	if n, err := strconv.ParseInt(u, 10, 64); err == nil {
		return &n, ""
	}
	return nil, u
}

func pinned(reasons []pinning.Reason) bool { return len(reasons) > 0 }
