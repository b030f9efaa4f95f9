package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/core/network"
)

// sandboxStopTimeout is how long the pause container gets to exit on SIGTERM.
const sandboxStopTimeout = 10 * time.Second

// StopPodSandbox stops a sandbox's containers, tears down its network and stops its
// pause container. Stopping a stopped or unknown sandbox succeeds, as the CRI asks;
// a sandbox known only by its checkpoint (its container is gone) gets its network
// torn down.
func (s *Service) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	sb, err := s.sandboxInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return &runtimeapi.StopPodSandboxResponse{}, s.tearDownOrphan(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	if err := s.stopSandboxContainers(ctx, sb.ID); err != nil {
		return nil, err
	}
	if err := s.tearDownSandbox(ctx, sb); err != nil {
		return nil, err
	}
	if sb.State == docker.StateRunning {
		if err := ignoreNotFound(s.docker.StopContainer(ctx, sb.ID, sandboxStopTimeout)); err != nil {
			return nil, fmt.Errorf("stop pod sandbox %s: %w", sb.ID, err)
		}
		s.logger(ctx).WithField("sandbox", sb.ID).Info("pod sandbox stopped")
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// stopSandboxContainers kills the sandbox's running containers (kubelet has given
// them their grace period already; the CRI says they must be forcibly terminated).
func (s *Service) stopSandboxContainers(ctx context.Context, sandboxID string) error {
	cs, err := s.docker.ListContainers(ctx, docker.ContainerFilter{Running: true, Labels: map[string]string{labelSandboxID: sandboxID}})
	if err != nil {
		return fmt.Errorf("list containers of pod sandbox %s: %w", sandboxID, err)
	}
	for _, c := range cs {
		if err := ignoreNotFound(s.docker.StopContainer(ctx, c.ID, 0)); err != nil {
			return fmt.Errorf("stop container %s of pod sandbox %s: %w", c.ID, sandboxID, err)
		}
	}
	return nil
}

// tearDownSandbox tears down a sandbox's CNI network (idempotent). A stopped sandbox
// whose network this process tore down already, and of which nothing is recorded
// since, is not torn down again (see tornDown).
func (s *Service) tearDownSandbox(ctx context.Context, sb docker.ContainerDetails) error {
	if s.deps.Network == nil || sb.NetworkMode == modeHost {
		return nil
	}
	if sb.State != docker.StateRunning && s.tornDown.has(sb.ID) && !s.deps.Network.Attached(sb.ID) {
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
	pid := 0
	if sb.State == docker.StateRunning {
		pid = sb.Pid
	}
	if err := s.tearDownNetwork(ctx, sb.ID, pid, md, ports); err != nil {
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
	return s.tearDownNetwork(ctx, id, 0, md, checkpointPorts(cp))
}
