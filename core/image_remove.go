package core

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveImage removes an image and every reference to it. It is idempotent, and it
// obeys for pinned images too (pinning is a recommendation to kubelet's GC; the CRI
// says a removal request must be carried out), logging that the image was pinned.
func (s *Service) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref, err := imageRef(req.GetImage())
	if err != nil {
		return nil, err
	}
	img, err := s.docker.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	log := s.logger(ctx).WithField("image", ref).WithField("id", img.ID)
	if reasons := s.pins.Check(ctx, pinningImage(&img)); len(reasons) > 0 {
		log.WithField("pinReasons", reasons).Info("removing pinned image as requested")
	}
	// Every reference goes with it, whichever one the request named (as containerd does).
	if err := s.docker.RemoveImage(ctx, img.ID); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, err
	}
	log.Info("removed image")
	return &runtimeapi.RemoveImageResponse{}, nil
}
