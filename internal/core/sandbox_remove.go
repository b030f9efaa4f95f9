package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// RemovePodSandbox removes a sandbox, its containers, its network (in case it was
// never stopped) and its checkpoint. Removing an unknown sandbox succeeds, after
// removing any container still labelled with its ID. A sandbox whose network this
// process tore down, with nothing attached since, is removed without being inspected
// first (kubelet removes what it stopped).
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
			// Containers a removal that failed half-way left (see removeSandboxAtOnce),
			// or whose sandbox was removed behind our back.
			if err := s.removeContainersOf(ctx, id); err != nil {
				return nil, err
			}
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
// details) its network, then the sandbox and its checkpoint. A sandbox whose network is
// released already (sb nil) has nothing left that needs this order: its containers,
// its pause container and its checkpoint are removed at once (upstream does one after
// the other); see removeSandboxAtOnce.
func (s *Service) removeSandbox(ctx context.Context, id string, sb *docker.ContainerDetails) (*runtimeapi.RemovePodSandboxResponse, error) {
	if sb == nil && s.deps.NRI == nil {
		return s.removeSandboxAtOnce(ctx, id)
	}
	if err := s.removeContainersOf(ctx, id); err != nil {
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
	if s.deps.NRI != nil {
		if sb == nil {
			if d, err := s.deps.Docker.InspectContainer(ctx, id); err == nil {
				sb = &d
			}
		}
		pod = &nriapi.PodSandbox{Id: id}
		if sb != nil {
			pod = nriPod(*sb, nil)
		}
		s.relayPodStop(ctx, pod)
	}
	if err := s.removeSandboxContainer(ctx, id); err != nil {
		return nil, err
	}
	if s.deps.NRI != nil {
		if err := s.deps.NRI.RemovePodSandbox(ctx, pod); err != nil {
			s.logger(ctx).WithError(err).WithField("sandbox", id).Warn("NRI RemovePodSandbox failed")
		}
		s.forgetRelayed(podStopKey(id))
	}
	if err := s.removeCheckpoint(ctx, id); err != nil {
		return nil, err
	}
	return s.removed(ctx, id), nil
}

// removeSandboxAtOnce removes a sandbox whose network is released: its containers, its
// pause container and its checkpoint, all at once. The order upstream keeps buys
// nothing here: the engine removes a pause container whose namespaces stopped or
// running containers joined (a running one keeps them alive until it is removed too),
// and the checkpoint matters only for a network that is gone. If a container's removal
// fails after the pause container's succeeded, kubelet's retry finds the sandbox gone
// and removes the containers left by their sandbox label (RemovePodSandbox).
func (s *Service) removeSandboxAtOnce(ctx context.Context, id string) (*runtimeapi.RemovePodSandboxResponse, error) {
	err := concurrently(
		func() error { return s.removeContainersOf(ctx, id) },
		func() error { return s.removeSandboxContainer(ctx, id) },
		func() error { return s.removeCheckpoint(ctx, id) },
	)
	if err != nil {
		return nil, err
	}
	return s.removed(ctx, id), nil
}

// removeContainersOf removes the containers of sandbox id (by its label), all at once.
func (s *Service) removeContainersOf(ctx context.Context, id string) error {
	cs, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelSandboxID: id}})
	if err != nil {
		return fmt.Errorf("list containers of pod sandbox %s: %w", id, err)
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
	return concurrently(removals...)
}

// removeSandboxContainer removes the pause container of sandbox id (gone: done).
func (s *Service) removeSandboxContainer(ctx context.Context, id string) error {
	if err := ignoreNotFound(s.deps.Docker.RemoveContainer(ctx, id)); err != nil {
		return fmt.Errorf("remove pod sandbox %s: %w", id, err)
	}
	return nil
}

func (s *Service) removeCheckpoint(ctx context.Context, id string) error {
	return timed(ctx, "checkpoint.remove", func() error { return s.deps.Checkpoints.Remove(id) })
}

// removed forgets sandbox id, which is gone with its checkpoint.
func (s *Service) removed(ctx context.Context, id string) *runtimeapi.RemovePodSandboxResponse {
	s.tornDown.forget(id)
	s.logger(ctx).WithField("sandbox", id).Info("pod sandbox removed")
	return &runtimeapi.RemovePodSandboxResponse{}
}

// ignoreInvalid returns nil for InvalidArgument errors (an id that cannot name a
// checkpoint has none).
func ignoreInvalid(err error) error {
	if cerrdefs.IsInvalidArgument(err) {
		return nil
	}
	return err
}
