package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// PodSandboxStats samples a sandbox: its containers, their sum, and the pod's network
// interfaces (upstream does not implement it).
func (s *Service) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.sandboxInspect(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.State == docker.StateRunning && sb.Pid > 0 {
		s.pids.set(sb.ID, proc{pid: sb.Pid, network: sb.NetworkMode})
	}
	cs, err := s.listContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb.ID})
	if err != nil {
		return nil, err
	}
	st, err := s.sandboxStats(ctx, sb.Container, cs)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// sandboxStats samples sandbox sb and its containers cs (those of sb only). Like a container's, the
// sandbox's usage comes from its cgroup, else from the engine. A container removed
// meanwhile is left out; any other failure fails the whole sample (its totals would be
// wrong). NotFound: the sandbox stopped meanwhile.
func (s *Service) sandboxStats(ctx context.Context, sb docker.Container, cs []listedContainer) (*runtimeapi.PodSandboxStats, error) {
	md, err := sandboxMetadata(sb)
	if err != nil {
		return nil, err
	}
	labels, annotations := splitLabels(sb.Labels)
	out := &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: md, Labels: labels, Annotations: annotations},
		Linux:      &runtimeapi.LinuxPodSandboxStats{},
	}
	if sb.State != docker.StateRunning {
		return out, nil
	}
	total, p, err := s.cgroupStats(ctx, sb.ID)
	switch {
	case cerrdefs.IsNotFound(err):
		return nil, err
	case err != nil:
		s.logger(ctx).WithError(err).WithField("sandbox", sb.ID).Debug("pod sandbox stats from the engine: its cgroup cannot be read here")
		if total, err = s.deps.Docker.ContainerStats(ctx, sb.ID); err != nil {
			return nil, fmt.Errorf("stats of pod sandbox %s: %w", sb.ID, err)
		}
		d, err := s.deps.Docker.InspectContainer(ctx, sb.ID)
		if err != nil {
			return nil, fmt.Errorf("inspect pod sandbox %s: %w", sb.ID, err)
		}
		p = proc{pid: d.Pid, network: d.NetworkMode}
	}
	for _, c := range cs {
		st, sample, err := s.containerStats(ctx, c.engine, c.cri.GetMetadata())
		if cerrdefs.IsNotFound(err) {
			s.logger(ctx).WithError(err).WithField("container", c.engine.ID).Debug("leaving out a container that is gone from its pod's stats")
			continue
		}
		if err != nil {
			return nil, err
		}
		sum(&total, sample)
		out.Linux.Containers = append(out.Linux.Containers, st)
	}
	out.Linux.Cpu = s.cpuUsage(sb.ID, total)
	out.Linux.Memory = memoryUsage(total)
	out.Linux.Process = &runtimeapi.ProcessUsage{Timestamp: total.Timestamp.UnixNano(), ProcessCount: &runtimeapi.UInt64Value{Value: total.Pids}}
	if p.network != modeHost && p.pid > 0 {
		if nw, err := s.podNetworkUsage(p.pid, time.Now()); err == nil {
			out.Linux.Network = nw
		} else {
			s.logger(ctx).WithError(err).WithField("sandbox", sb.ID).Debug("no pod network counters")
		}
	}
	return out, nil
}
