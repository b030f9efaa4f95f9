package core

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// ListPodSandboxStats samples the sandboxes matching the filter with two engine
// lists (the sandboxes, then every kubernetes container) and the cgroups of what runs:
// no engine call per pod once their processes are known. A sandbox removed meanwhile,
// or whose stats (its own or one of its containers') fail, is left out (leaveOut): a
// pod's stats are complete or absent.
func (s *Service) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	lf := docker.ContainerFilter{ID: f.GetId(), Labels: map[string]string{}}
	for k, v := range f.GetLabelSelector() {
		lf.Labels[k] = v
	}
	lf.Labels[labelContainerType] = typeSandbox
	sandboxes, err := s.deps.Docker.ListContainers(ctx, lf)
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	var cs []listedContainer
	if len(sandboxes) > 0 {
		var sbID string
		if len(sandboxes) == 1 {
			sbID = sandboxes[0].ID
		}
		if cs, err = s.listContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sbID}); err != nil {
			return nil, err
		}
	}
	byPod := map[string][]listedContainer{}
	for _, c := range cs {
		byPod[c.engine.Labels[labelSandboxID]] = append(byPod[c.engine.Labels[labelSandboxID]], c)
	}
	out := make([]*runtimeapi.PodSandboxStats, 0, len(sandboxes))
	for _, sb := range sandboxes {
		if s.hidden(sb.ID) {
			continue // its NRI plugins have not run it yet
		}
		st, err := s.sandboxStats(ctx, sb, byPod[sb.ID])
		if err != nil {
			if s.leaveOut(ctx, err, "sandbox", sb.ID) {
				continue
			}
			return nil, err
		}
		out = append(out, st)
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}
