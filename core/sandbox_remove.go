package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// RemovePodSandbox removes a sandbox, its containers, its network (in case it was
// never stopped) and its checkpoint. Removing an unknown sandbox succeeds. A sandbox
// whose network this process tore down, with nothing attached since, is removed
// without being inspected first (kubelet removes what it stopped).
func (s *Service) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	if s.networkReleased(id) {
		return s.removeSandbox(ctx, id, nil)
	}
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
	return s.removeSandbox(ctx, sb.ID, &sb)
}

// removeSandbox removes the containers of sandbox id, all at once, then (with sb, its
// details) its network, then the sandbox and its checkpoint.
func (s *Service) removeSandbox(ctx context.Context, id string, sb *docker.ContainerDetails) (*runtimeapi.RemovePodSandboxResponse, error) {
	cs, err := s.docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelSandboxID: id}})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod sandbox %s: %w", id, err)
	}
	removals := make([]func() error, 0, len(cs))
	for _, c := range cs {
		removals = append(removals, func() error {
			if err := s.removeContainer(ctx, c.ID); err != nil {
				return fmt.Errorf("remove container %s of pod sandbox %s: %w", c.ID, id, err)
			}
			return nil
		})
	}
	if err := concurrently(removals...); err != nil {
		return nil, err
	}
	if sb != nil {
		netns := ""
		if sb.State == docker.StateRunning {
			netns = netnsPath(sb.Pid)
		}
		if err := s.tearDownSandbox(ctx, *sb, netns); err != nil {
			return nil, err
		}
	}
	var pod *nriapi.PodSandbox
	if s.nri != nil {
		if sb == nil {
			if d, err := s.docker.InspectContainer(ctx, id); err == nil {
				sb = &d
			}
		}
		pod = &nriapi.PodSandbox{Id: id}
		if sb != nil {
			pod = nriPod(*sb, nil)
		}
		s.relayPodStop(ctx, pod)
	}
	if err := ignoreNotFound(s.docker.RemoveContainer(ctx, id)); err != nil {
		return nil, fmt.Errorf("remove pod sandbox %s: %w", id, err)
	}
	if s.nri != nil {
		if err := s.nri.RemovePodSandbox(ctx, pod); err != nil {
			s.logger(ctx).WithError(err).WithField("sandbox", id).Warn("NRI RemovePodSandbox failed")
		}
		s.forgetRelayed(podStopKey(id))
	}
	if err := timed(ctx, "checkpoint.remove", func() error { return s.deps.Checkpoints.Remove(id) }); err != nil {
		return nil, err
	}
	s.tornDown.forget(id)
	s.logger(ctx).WithField("sandbox", id).Info("pod sandbox removed")
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
