package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// PortForward prepares a streaming port-forward into a ready sandbox's network
// namespace and returns its URL.
func (s *Service) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	st, err := s.streamer()
	if err != nil {
		return nil, err
	}
	sb, err := s.sandboxInspect(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.State != docker.StateRunning {
		return nil, fmt.Errorf("pod sandbox %s is not ready: %w", sb.ID, cerrdefs.ErrFailedPrecondition)
	}
	for _, p := range req.GetPort() {
		if p <= 0 || p > 65535 {
			return nil, fmt.Errorf("port %d is not a TCP port: %w", p, cerrdefs.ErrInvalidArgument)
		}
	}
	req.PodSandboxId = sb.ID
	return st.GetPortForward(req)
}
