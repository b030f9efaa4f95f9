package core

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStats samples one container's CPU and memory usage.
func (s *Service) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, md, err := s.containerWithMetadata(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	st, _, err := s.containerStats(ctx, c.Container, md)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}
