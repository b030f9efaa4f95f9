package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ReopenContainerLog reopens a running container's CRI log file after kubelet
// rotated it (upstream always fails this call).
func (s *Service) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if s.deps.Logs == nil || c.Labels[labelLogPath] == "" {
		return nil, fmt.Errorf("container %s has no CRI log: %w", c.ID, cerrdefs.ErrFailedPrecondition)
	}
	if err := s.deps.Logs.Reopen(c.ID); err != nil {
		return nil, err
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
