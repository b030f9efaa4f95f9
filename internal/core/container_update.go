package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
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
		if res.MemorySwap < 0 {
			// The engine applies a swap limit to a running container only when it is a number.
			return nil, fmt.Errorf("update resources of container %s: unlimited swap (memory_swap_limit_in_bytes -1 or unified[%s] \"max\") is applied by docker only at creation: %w",
				c.ID, swapMaxKey, cerrdefs.ErrNotImplemented)
		}
		if s.deps.NRI != nil {
			if res, err = s.nriUpdateResources(ctx, c, r, res); err != nil {
				return nil, err
			}
		}
		if err := s.deps.Docker.UpdateContainerResources(ctx, c.ID, res); err != nil {
			return nil, fmt.Errorf("update resources of container %s: %w", c.ID, err)
		}
		if s.deps.NRI != nil {
			pod, ctr := s.nriTarget(ctx, c)
			ctr.Linux.Resources = nriResources(res)
			if err := s.deps.NRI.PostUpdateContainer(ctx, pod, ctr); err != nil {
				s.logger(ctx).WithError(err).WithField("container", c.ID).Warn("NRI PostUpdateContainer failed")
			}
		}
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}
