package core

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateContainerResources changes a container's cgroup limits.
func (s *Service) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := s.containerInspect(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if r := req.GetLinux(); r != nil {
		res, err := s.engineResources(ctx, r)
		if err != nil {
			return nil, err
		}
		if err := s.docker.UpdateContainerResources(ctx, c.ID, res); err != nil {
			return nil, fmt.Errorf("update resources of container %s: %w", c.ID, err)
		}
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}
