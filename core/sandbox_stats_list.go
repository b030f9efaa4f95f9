package core

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListPodSandboxStats samples the sandboxes matching the filter.
func (s *Service) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	list, err := s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: f.GetId(), LabelSelector: f.GetLabelSelector()}})
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.PodSandboxStats, 0, len(list.GetItems()))
	for _, item := range list.GetItems() {
		sb, err := s.sandboxInspect(ctx, item.GetId())
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		st, err := s.sandboxStats(ctx, sb)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}
