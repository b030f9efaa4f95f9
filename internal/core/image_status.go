package core

import (
	"context"
	"encoding/json"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageStatusInfo is the verbose ImageStatus info, shown by `crictl inspecti`.
type imageStatusInfo struct {
	ID         string            `json:"id"`
	User       string            `json:"user,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Pinned     bool              `json:"pinned"`
	PinReasons []pin.Reason      `json:"pinReasons,omitempty"`
}

// ImageStatus returns one image; an unknown image gives an empty response, as the CRI says.
func (s *Service) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref, err := imageRef(req.GetImage())
	if err != nil {
		return nil, err
	}
	img, err := s.deps.Docker.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) && s.waitPreloaded(ctx, ref) {
		img, err = s.deps.Docker.InspectImage(ctx, ref)
	}
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	reasons := s.deps.Pins.Check(ctx, pinningImage(&img))
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

func (s *Service) waitPreloaded(ctx context.Context, ref string) bool {
	return s.deps.Preload != nil && s.deps.Preload.WaitPreloaded(ctx, ref)
}
