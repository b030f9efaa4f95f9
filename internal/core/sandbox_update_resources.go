package core

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdatePodSandboxResources is kubelet's notice of a pod's new resources after an
// in-place resize (kubelet 1.33+). kubelet resizes the pod-level cgroup itself (the
// sandbox's cgroup parent, which it owns) before this call and each container's through
// UpdateContainerResources; the sandbox's own engine container, the pause process, is
// given no limits of its own, so the engine has nothing to apply here. The call checks
// that the sandbox exists (NotFound) and that the resources are ones the engine could
// take (the swap settings as UpdateContainerResources reads them: InvalidArgument), and
// answers success, as the CRI's best-effort contract allows.
func (s *Service) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	sb, err := s.sandboxInspect(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	for field, r := range map[string]*runtimeapi.LinuxContainerResources{"overhead": req.GetOverhead(), "resources": req.GetResources()} {
		if r == nil {
			continue
		}
		if _, _, err := resources(r); err != nil {
			return nil, fmt.Errorf("update resources of pod sandbox %s: %s: %w", sb.ID, field, err)
		}
	}
	s.logger(ctx).WithField("sandbox", sb.ID).WithField("memory", req.GetResources().GetMemoryLimitInBytes()).
		WithField("cpu_quota", req.GetResources().GetCpuQuota()).Info("pod sandbox resources noted; the pod cgroup is kubelet's")
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
