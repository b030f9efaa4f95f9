package core

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// imageRef validates the image named by a CRI ImageSpec and returns it.
func imageRef(spec *runtimeapi.ImageSpec) (string, error) {
	if spec == nil || strings.TrimSpace(spec.Image) == "" {
		return "", fmt.Errorf("image reference is empty: %w", cerrdefs.ErrInvalidArgument)
	}
	ref := spec.Image
	if err := imageref.Check(ref); err != nil {
		return "", fmt.Errorf("invalid %w: %w", err, cerrdefs.ErrInvalidArgument)
	}
	return ref, nil
}

func pinningImage(img *docker.Image) pin.Image {
	return pin.Image{ID: img.ID, RepoTags: img.RepoTags, RepoDigests: img.RepoDigests, Labels: img.Labels}
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

func pinned(reasons []pin.Reason) bool { return len(reasons) > 0 }

// minIDPrefix is the shortest bare hexadecimal filter taken for an image ID prefix
// (with "sha256:" in front any length is).
const minIDPrefix = 6

// imageMatcher is a CRI image filter (`crictl images X`): an image ID or ID prefix
// (with or without "sha256:"), or a reference: "name:tag", "name@digest", or a bare
// name, which matches every tag and digest of that repository, as the engine's
// reference filter does. A filter that may be both (a short hex name) matches either.
type imageMatcher struct {
	idPrefix string        // hex digits of the ID's start; "" when the filter cannot be an ID
	ref      *imageref.Ref // nil when the filter cannot be a reference
}

// imageFilter returns the predicate for a CRI image filter; InvalidArgument, naming
// the filter, when it is neither an image ID nor a reference.
func imageFilter(f *runtimeapi.ImageFilter) (func(*pin.Image) bool, error) {
	text := strings.TrimSpace(f.GetImage().GetImage())
	if text == "" {
		return func(*pin.Image) bool { return true }, nil
	}
	var m imageMatcher
	hex, hasAlg := strings.CutPrefix(text, "sha256:")
	if isHex(hex) && len(hex) <= 64 && (hasAlg || len(hex) >= minIDPrefix) {
		m.idPrefix = hex
	}
	if !hasAlg { // "sha256:…" is a digest or ID, never the repository "sha256"
		if r, err := imageref.Parse(text); err == nil {
			m.ref = &r
		}
	}
	if m.idPrefix == "" && m.ref == nil {
		return nil, fmt.Errorf("invalid image filter %q: neither an image reference nor an image ID: %w", text, cerrdefs.ErrInvalidArgument)
	}
	return m.match, nil
}

func (m imageMatcher) match(img *pin.Image) bool {
	if m.idPrefix != "" {
		if strings.HasPrefix(strings.TrimPrefix(img.ID, "sha256:"), m.idPrefix) {
			return true
		}
		if len(m.idPrefix) == 64 && hasDigest(img.RepoDigests, "sha256:"+m.idPrefix) {
			return true
		}
	}
	return m.ref != nil && (slices.ContainsFunc(img.RepoTags, m.matchRef) || slices.ContainsFunc(img.RepoDigests, m.matchRef))
}

// matchRef reports whether one of an image's references is what the filter names.
func (m imageMatcher) matchRef(s string) bool {
	r, err := imageref.Parse(s)
	if err != nil {
		return false
	}
	switch {
	case m.ref.Digest != "":
		return r.DigestKey() == m.ref.DigestKey()
	case m.ref.Tag != "":
		return r.TagKey() == m.ref.TagKey()
	}
	return r.Name == m.ref.Name
}

// hasDigest reports whether one of repoDigests ("name@sha256:…") has digest d.
func hasDigest(repoDigests []string, d string) bool {
	for _, rd := range repoDigests {
		if _, got, ok := strings.Cut(rd, "@"); ok && got == d {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdef") == ""
}
