package core

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListPodSandboxStats samples the sandboxes matching the filter. A sandbox removed
// meanwhile, or whose stats (its own or one of its containers') fail, is left out
// (leaveOut): a pod's stats are complete or absent.
func (s *Service) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	list, err := s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: f.GetId(), LabelSelector: f.GetLabelSelector()}})
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.PodSandboxStats, 0, len(list.GetItems()))
	for _, item := range list.GetItems() {
		st, err := s.sandboxStatsByID(ctx, item.GetId())
		if err != nil {
			if s.leaveOut(ctx, err, "sandbox", item.GetId()) {
				continue
			}
			return nil, err
		}
		out = append(out, st)
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}
