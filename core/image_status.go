package core

import (
	"context"
	"encoding/json"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/pinning"
)

// imageStatusInfo is the verbose ImageStatus info, shown by `crictl inspecti`.
type imageStatusInfo struct {
	ID         string            `json:"id"`
	User       string            `json:"user,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Pinned     bool              `json:"pinned"`
	PinReasons []pinning.Reason  `json:"pinReasons,omitempty"`
}

// ImageStatus returns one image; an unknown image gives an empty response, as the CRI says.
func (s *Service) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref, err := imageRef(req.GetImage())
	if err != nil {
		return nil, err
	}
	img, err := s.docker.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) && s.waitPreloaded(ctx, ref) {
		img, err = s.docker.InspectImage(ctx, ref)
	}
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	reasons := s.pins.Check(ctx, pinningImage(&img))
	resp := &runtimeapi.ImageStatusResponse{Image: criImage(&img, pinned(reasons))}
	if req.GetVerbose() {
		raw, err := json.Marshal(imageStatusInfo{
			ID: img.ID, User: img.User, Labels: img.Labels, Pinned: pinned(reasons), PinReasons: reasons,
		})
		if err != nil {
			return nil, err
		}
		resp.Info = map[string]string{"info": string(raw)}
	}
	return resp, nil
}

// PreloadWaiter is implemented by a Pinner that preloads images in the background
// (pinning's Setup): WaitPreloaded waits, bounded, while a pending preload file may
// still provide ref and reports whether it waited. ImageStatus of an absent image asks
// it first, so that kubelet does not turn to a registry for an image being preloaded.
type PreloadWaiter interface {
	WaitPreloaded(ctx context.Context, ref string) bool
}

func (s *Service) waitPreloaded(ctx context.Context, ref string) bool {
	w, ok := s.pins.(PreloadWaiter)
	return ok && w.WaitPreloaded(ctx, ref)
}
