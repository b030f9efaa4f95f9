package core

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveImage removes an image and every reference to it. It is idempotent. A pinned
// image is refused (FailedPrecondition, naming the pin and how to unpin) when
// RefusePinnedRemoval is set: the restore of pinned images would put it back
// (kubelet never asks; crictl rmi and scripts do). Otherwise it obeys for pinned
// images too, logging that the image was pinned.
func (s *Service) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref, err := imageRef(req.GetImage())
	if err != nil {
		return nil, err
	}
	img, err := s.deps.Docker.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	log := s.logger(ctx).WithField("image", ref).WithField("id", img.ID)
	if reasons := s.deps.Pins.Check(ctx, pinningImage(&img)); len(reasons) > 0 {
		if s.cfg.RefusePinnedRemoval {
			return nil, fmt.Errorf("%w: image %s is pinned (%s) and would be restored; to remove it, unpin it first: %s",
				cerrdefs.ErrFailedPrecondition, ref, reasonsText(reasons), pin.UnpinHint(reasons))
		}
		log.WithField("pinReasons", reasons).Info("removing pinned image as requested")
	}
	// Every reference goes with it, whichever one the request named (as containerd does).
	if err := s.deps.Docker.RemoveImage(ctx, img.ID); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, err
	}
	log.Info("removed image")
	return &runtimeapi.RemoveImageResponse{}, nil
}

// reasonsText renders pin reasons as "source: detail, ...".
func reasonsText(reasons []pin.Reason) string {
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = r.Source + ": " + r.Detail
	}
	return strings.Join(parts, ", ")
}
