package core

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListContainerStats samples the containers matching the filter; a container removed
// meanwhile, or whose stats fail, is left out (leaveOut).
func (s *Service) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	cs, err := s.listContainers(ctx, &runtimeapi.ContainerFilter{Id: f.GetId(), PodSandboxId: f.GetPodSandboxId(), LabelSelector: f.GetLabelSelector()})
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.ContainerStats, 0, len(cs))
	for _, c := range cs {
		st, _, err := s.containerStats(ctx, c.engine, c.cri.GetMetadata())
		if err != nil {
			if s.leaveOut(ctx, err, "container", c.engine.ID) {
				continue // removed while listing, or its stats failed
			}
			return nil, err
		}
		out = append(out, st)
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: out}, nil
}
