package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// StopContainer stops a container within its grace period. Stopping a stopped or
// unknown container succeeds, as the CRI asks.
func (s *Service) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	id := req.GetContainerId()
	var c docker.ContainerDetails
	// One of ours for sure (see Service.created) is stopped without an inspect.
	if s.deps.NRI != nil || !s.created.has(id) {
		var err error
		c, err = s.containerInspect(ctx, id)
		if cerrdefs.IsNotFound(err) {
			return &runtimeapi.StopContainerResponse{}, nil
		}
		if err != nil {
			return nil, err
		}
		id = c.ID
	}
	timeout := max(time.Duration(req.GetTimeout())*time.Second, 0)
	if err := ignoreNotFound(s.deps.Docker.StopContainer(ctx, id, timeout)); err != nil {
		return nil, fmt.Errorf("stop container %s: %w", id, err)
	}
	if s.deps.NRI != nil {
		pod, ctr := s.nriTarget(ctx, c)
		s.relayStop(ctx, pod, ctr)
	}
	s.logger(ctx).WithField("container", id).Info("container stopped")
	return &runtimeapi.StopContainerResponse{}, nil
}
