package core

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/pinning"
)

// ListImages lists the engine's images with their pin state.
func (s *Service) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	match, err := imageFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	all, err := s.docker.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	selected := make([]docker.Image, 0, len(all))
	views := make([]pinning.Image, 0, len(all))
	for i := range all {
		view := pinningImage(&all[i])
		if match(&view) {
			selected = append(selected, all[i])
			views = append(views, view)
		}
	}
	reasons := s.pins.Evaluate(ctx, views)
	out := make([]*runtimeapi.Image, len(selected))
	npinned := 0
	for i := range selected {
		out[i] = criImage(&selected[i], pinned(reasons[i]))
		if out[i].Pinned {
			npinned++
		}
	}
	s.logger(ctx).WithField("images", len(out)).WithField("pinned", npinned).Debug("listed images")
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// imageFilter returns the predicate for a CRI image filter: a reference pattern
// (tag, digest or bare repository, normalised) or an image ID or ID prefix.
func imageFilter(f *runtimeapi.ImageFilter) (func(*pinning.Image) bool, error) {
	ref := strings.TrimSpace(f.GetImage().GetImage())
	if ref == "" {
		return func(*pinning.Image) bool { return true }, nil
	}
	idPrefix := strings.TrimPrefix(ref, "sha256:")
	pattern, err := pinning.ParsePattern(ref)
	if err != nil || strings.Contains(ref, "*") {
		return nil, fmt.Errorf("invalid image filter %q: %w", ref, cerrdefs.ErrInvalidArgument)
	}
	return func(img *pinning.Image) bool {
		if len(idPrefix) >= 6 && strings.HasPrefix(strings.TrimPrefix(img.ID, "sha256:"), idPrefix) {
			return true
		}
		return pattern.Match(img)
	}, nil
}
