package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StopContainer stops a container within its grace period. Stopping a stopped or
// unknown container succeeds, as the CRI asks.
func (s *Service) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.containerInspect(ctx, req.GetContainerId())
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.StopContainerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	timeout := max(time.Duration(req.GetTimeout())*time.Second, 0)
	if err := ignoreNotFound(s.docker.StopContainer(ctx, c.ID, timeout)); err != nil {
		return nil, fmt.Errorf("stop container %s: %w", c.ID, err)
	}
	if s.nri != nil {
		pod, ctr := s.nriTarget(ctx, c)
		s.relayStop(ctx, pod, ctr)
	}
	s.logger(ctx).WithField("container", c.ID).Info("container stopped")
	return &runtimeapi.StopContainerResponse{}, nil
}
