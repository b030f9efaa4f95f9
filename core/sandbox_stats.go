package core

import (
	"context"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// PodSandboxStats samples a sandbox: its containers, their sum, and the pod's network
// interfaces (upstream does not implement it).
func (s *Service) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.sandboxInspect(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	st, err := s.sandboxStats(ctx, sb)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// sandboxStats samples a sandbox and its containers.
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
	total, err := s.docker.ContainerStats(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	cs, err := s.listContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb.ID})
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		st, sample, err := s.containerStats(ctx, c.engine, c.cri.GetMetadata())
		if cerrdefs.IsNotFound(err) {
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
