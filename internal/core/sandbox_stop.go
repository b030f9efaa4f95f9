package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/network"
)

// sandboxStopTimeout is how long the pause container gets to exit on SIGTERM.
const sandboxStopTimeout = 10 * time.Second

// StopPodSandbox tears down a sandbox's network, kills its containers and stops its
// pause container, all at once: the pause process's network namespace is held open
// for the teardown (holdNetns), so the plugins find it while the pause container
// stops. A failed teardown is retried by kubelet without the namespace, which is gone
// by then: the plugins release what they hold on the host. Stopping a stopped or
// unknown sandbox succeeds, as the CRI asks; a sandbox known only by its checkpoint
// (its container is gone) gets its network torn down.
func (s *Service) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	sb, err := s.sandboxInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.StopPodSandboxResponse{}, s.tearDownOrphan(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	cs, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{Running: true, Labels: map[string]string{labelSandboxID: sb.ID}})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod sandbox %s: %w", sb.ID, err)
	}
	netns := ""
	if sb.State == docker.StateRunning {
		var release func()
		netns, release = holdNetns(sb.Pid)
		defer release()
	}
	steps := make([]func() error, 0, len(cs)+2)
	// kubelet has given the containers their grace period already; the CRI says they
	// must be forcibly terminated.
	for _, c := range cs {
		steps = append(steps, func() error {
			if err := ignoreNotFound(s.deps.Docker.StopContainer(ctx, c.ID, 0)); err != nil {
				return fmt.Errorf("stop container %s of pod sandbox %s: %w", c.ID, sb.ID, err)
			}
			if s.deps.NRI != nil {
				if d, err := s.deps.Docker.InspectContainer(ctx, c.ID); err == nil {
					s.relayStop(ctx, nriPod(sb, nil), nriContainer(d))
				}
			}
			return nil
		})
	}
	if s.deps.NRI != nil {
		// NRI's order: the containers are stopped, then the plugins told of the pod's
		// stop while it is still there, then its network and pause container go.
		defer s.deps.NRI.BlockSync()()
		if err := concurrently(steps...); err != nil {
			return nil, err
		}
		s.relayPodStop(ctx, nriPod(sb, nil))
		steps = steps[:0]
	}
	steps = append(steps, func() error { return s.tearDownSandbox(ctx, sb, netns) })
	if sb.State == docker.StateRunning {
		steps = append(steps, func() error {
			if err := ignoreNotFound(s.deps.Docker.StopContainer(ctx, sb.ID, sandboxStopTimeout)); err != nil {
				return fmt.Errorf("stop pod sandbox %s: %w", sb.ID, err)
			}
			s.logger(ctx).WithField("sandbox", sb.ID).Info("pod sandbox stopped")
			return nil
		})
	}
	if err := concurrently(steps...); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// tearDownSandbox tears down a sandbox's CNI network (idempotent) in the network
// namespace netns ("": gone). A stopped sandbox whose network this process tore down
// already, and of which nothing is recorded since, is not torn down again (see
// tornDown).
func (s *Service) tearDownSandbox(ctx context.Context, sb docker.ContainerDetails, netns string) error {
	if s.deps.Network == nil || sb.NetworkMode == modeHost {
		return nil
	}
	if sb.State != docker.StateRunning && s.networkReleased(sb.ID) {
		s.logger(ctx).WithField("sandbox", sb.ID).Debug("pod network torn down already")
		return nil
	}
	md, err := sandboxMetadata(sb.Container)
	if err != nil {
		return err
	}
	var ports []network.PortMapping
	if cp, err := s.readCheckpoint(sb.ID); err == nil && cp != nil {
		ports = checkpointPorts(cp)
	}
	if err := s.tearDownNetwork(ctx, sb.ID, netns, md, ports); err != nil {
		return err
	}
	s.tornDown.add(sb.ID)
	return nil
}

// tearDownOrphan tears down the network of a sandbox whose container is gone but
// whose checkpoint is left (the engine lost it, or it was removed behind our back).
func (s *Service) tearDownOrphan(ctx context.Context, id string) error {
	if s.deps.Network == nil || id == "" {
		return nil
	}
	cp, err := s.readCheckpoint(id)
	if err != nil || cp == nil || cp.Data.HostNetwork {
		return nil // nothing known to tear down; a corrupt checkpoint is ListPodSandbox's to clean
	}
	md := &runtimeapi.PodSandboxMetadata{Name: cp.Name, Namespace: cp.Namespace}
	return s.tearDownNetwork(ctx, id, "", md, checkpointPorts(cp))
}
