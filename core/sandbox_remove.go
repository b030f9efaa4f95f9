package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// RemovePodSandbox removes a sandbox, its containers, its network (in case it was
// never stopped) and its checkpoint. Removing an unknown sandbox succeeds.
func (s *Service) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	sb, err := s.sandboxInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		s.tornDown.forget(id)
		if err := s.tearDownOrphan(ctx, id); err != nil {
			return nil, err
		}
		if id != "" {
			if err := ignoreInvalid(s.deps.Checkpoints.Remove(id)); err != nil {
				return nil, err
			}
		}
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	cs, err := s.docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelSandboxID: sb.ID}})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod sandbox %s: %w", sb.ID, err)
	}
	for _, c := range cs {
		if err := s.removeContainer(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("remove container %s of pod sandbox %s: %w", c.ID, sb.ID, err)
		}
	}
	if err := s.tearDownSandbox(ctx, sb); err != nil {
		return nil, err
	}
	if err := ignoreNotFound(s.docker.RemoveContainer(ctx, sb.ID)); err != nil {
		return nil, fmt.Errorf("remove pod sandbox %s: %w", sb.ID, err)
	}
	if err := timed(ctx, "checkpoint.remove", func() error { return s.deps.Checkpoints.Remove(sb.ID) }); err != nil {
		return nil, err
	}
	s.tornDown.forget(sb.ID)
	s.logger(ctx).WithField("sandbox", sb.ID).Info("pod sandbox removed")
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// ignoreInvalid returns nil for InvalidArgument errors (an id that cannot name a
// checkpoint has none).
func ignoreInvalid(err error) error {
	if cerrdefs.IsInvalidArgument(err) {
		return nil
	}
	return err
}
