package core

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// ListImages lists the engine's images with their pin state.
func (s *Service) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	match, err := imageFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	all, err := s.deps.Docker.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	selected := make([]docker.Image, 0, len(all))
	views := make([]pin.Image, 0, len(all))
	for i := range all {
		view := pinningImage(&all[i])
		if match(&view) {
			selected = append(selected, all[i])
			views = append(views, view)
		}
	}
	reasons, err := s.deps.Pins.Evaluate(ctx, views)
	if err != nil {
		// Listing without a source's pins would show its pinned images unpinned, and
		// kubelet's image GC would delete them: refuse (Unavailable) until it answers.
		return nil, fmt.Errorf("list images: %w", err)
	}
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
