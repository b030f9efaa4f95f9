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
	st, err := s.sandboxStatsByID(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// sandboxStatsByID samples sandbox id and its containers.
func (s *Service) sandboxStatsByID(ctx context.Context, id string) (*runtimeapi.PodSandboxStats, error) {
	sb, err := s.sandboxInspect(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.sandboxStats(ctx, sb)
}

// sandboxStats samples a sandbox and its containers; a container removed meanwhile
// is left out, any other failure fails the whole sample (its totals would be wrong).
func (s *Service) sandboxStats(ctx context.Context, sb docker.ContainerDetails) (*runtimeapi.PodSandboxStats, error) {
	md, err := sandboxMetadata(sb.Container)
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
	total, err := s.deps.Docker.ContainerStats(ctx, sb.ID)
	if err != nil {
		return nil, fmt.Errorf("stats of pod sandbox %s: %w", sb.ID, err)
	}
	cs, err := s.listContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb.ID})
	if err != nil {
		return nil, err
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
	out.Linux.Cpu = cpuUsage(total)
	out.Linux.Memory = memoryUsage(total)
	out.Linux.Process = &runtimeapi.ProcessUsage{Timestamp: total.Timestamp.UnixNano(), ProcessCount: &runtimeapi.UInt64Value{Value: total.Pids}}
	if sb.NetworkMode != modeHost {
		if nw, err := podNetworkUsage(sb.Pid, time.Now()); err == nil {
			out.Linux.Network = nw
		} else {
			s.logger(ctx).WithError(err).WithField("sandbox", sb.ID).Debug("no pod network counters")
		}
	}
	return out, nil
}
