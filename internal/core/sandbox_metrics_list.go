package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/stats"
)

// ListPodSandboxMetrics reports the metrics of every ready sandbox: the counters of
// its network namespace as the pod's metrics, and each running container's cgroup,
// processes, filesystem and limits as its container metrics (upstream does not
// implement it). Sandboxes and containers that stop meanwhile are left out.
//
// container_fs_usage_bytes is the size of the container's writable layer: the last
// background measurement (Deps.Layers), else, while a container has none yet, what
// the engine computes when asked to list sizes (that list makes it walk the
// writable layers, so it is asked for only then).
func (s *Service) ListPodSandboxMetrics(ctx context.Context, _ *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	if s.deps.Metrics == nil {
		return nil, fmt.Errorf("metrics are not enabled: %w", cerrdefs.ErrNotImplemented)
	}
	sandboxes, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{
		Labels: map[string]string{labelContainerType: typeSandbox}, Running: true,
	})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := s.metricsContainers(ctx)
	if err != nil {
		return nil, err
	}
	byPod := map[string][]docker.Container{}
	for _, c := range containers {
		byPod[c.Labels[labelSandboxID]] = append(byPod[c.Labels[labelSandboxID]], c)
	}
	info, err := s.engineInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine info: %w", err)
	}
	now := time.Now()
	out := make([]*runtimeapi.PodSandboxMetrics, 0, len(sandboxes))
	var count int
	for _, sb := range sandboxes {
		md, err := sandboxMetadata(sb)
		if err != nil {
			s.logger(ctx).WithError(err).Debug("skipping container that looks like a sandbox")
			continue
		}
		pm, err := s.podSandboxMetrics(ctx, sb, md, byPod[sb.ID], info.DockerRootDir, now)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			// One pod's trouble must not blank every pod's metrics (kubelet exports
			// nothing when the call fails).
			s.logger(ctx).WithError(err).WithField("sandbox", sb.ID).Warn("leaving out the metrics of a pod sandbox")
			continue
		}
		count += len(pm.ContainerMetrics)
		out = append(out, pm)
	}
	s.logger(ctx).WithField("count", len(out)).WithField("containers", count).Debug("listed pod sandbox metrics")
	return &runtimeapi.ListPodSandboxMetricsResponse{PodMetrics: out}, nil
}

// metricsContainers lists the running kubernetes containers for their metrics, with
// the engine's sizes of their writable layers (SizeRw) when one of them has no
// background measurement yet (a container just started: its metrics must not lack
// container_fs_usage_bytes, as critest checks), else without (SizeRw -1).
func (s *Service) metricsContainers(ctx context.Context) ([]docker.Container, error) {
	f := docker.ContainerFilter{Labels: map[string]string{labelContainerType: typeContainer}, Running: true}
	if s.deps.Layers != nil {
		cs, err := s.deps.Docker.ListContainers(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
		measured := true
		for i := range cs {
			cs[i].SizeRw = -1
			if _, ok := s.deps.Layers.Last(cs[i].ID); !ok {
				measured = false
			}
		}
		if measured {
			return cs, nil
		}
	}
	f.Size = true
	cs, err := s.deps.Docker.ListContainers(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return cs, nil
}

// podSandboxMetrics collects the metrics of sandbox sb (of pod md) and of its
// running containers cs; NotFound when the sandbox is not (or no longer) running.
// A container that stops meanwhile, or whose files cannot be read, is left out.
func (s *Service) podSandboxMetrics(ctx context.Context, sb docker.Container, md *runtimeapi.PodSandboxMetadata,
	cs []docker.Container, fsPath string, now time.Time,
) (*runtimeapi.PodSandboxMetrics, error) {
	d, err := s.deps.Docker.InspectContainer(ctx, sb.ID)
	if err != nil {
		return nil, fmt.Errorf("inspect pod sandbox %s: %w", sb.ID, err)
	}
	if d.State != docker.StateRunning || d.Pid <= 0 {
		return nil, fmt.Errorf("pod sandbox %s is not running: %w", sb.ID, cerrdefs.ErrNotFound)
	}
	log := s.logger(ctx)
	out := &runtimeapi.PodSandboxMetrics{PodSandboxId: sb.ID, Metrics: []*runtimeapi.Metric{}, ContainerMetrics: []*runtimeapi.ContainerMetrics{}}
	if d.NetworkMode != modeHost {
		pod := stats.Target{
			ContainerID: sb.ID, ContainerName: sandboxName, Name: sb.Name, Image: sb.Image,
			PodName: md.GetName(), PodNamespace: md.GetNamespace(), Pid: d.Pid,
		}
		ms, err := s.deps.Metrics.PodNetwork(pod, now)
		switch {
		case cerrdefs.IsNotFound(err):
			return nil, err
		case err != nil:
			log.WithError(err).WithField("sandbox", sb.ID).Debug("no pod network metrics")
		default:
			out.Metrics = ms
		}
	}
	for _, c := range cs {
		t, err := s.metricsTarget(ctx, c, md, fsPath)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			log.WithError(err).WithField("container", c.ID).Warn("leaving out the metrics of a container")
			continue
		}
		ms, err := s.deps.Metrics.Collect(t, now)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			log.WithError(err).WithField("container", c.ID).Warn("cannot collect container metrics")
			continue
		}
		out.ContainerMetrics = append(out.ContainerMetrics, &runtimeapi.ContainerMetrics{ContainerId: c.ID, Metrics: ms})
	}
	return out, nil
}

// metricsTarget describes container c of pod for the collector; NotFound when it
// is not (or no longer) a running kubernetes container.
func (s *Service) metricsTarget(ctx context.Context, c docker.Container, pod *runtimeapi.PodSandboxMetadata, fsPath string) (stats.Target, error) {
	md, err := containerMetadata(c)
	if err != nil {
		s.logger(ctx).WithError(err).Debug("skipping container with a foreign name")
		return stats.Target{}, fmt.Errorf("container %s has a foreign name: %w", c.ID, cerrdefs.ErrNotFound)
	}
	d, err := s.deps.Docker.InspectContainer(ctx, c.ID)
	if err != nil {
		return stats.Target{}, fmt.Errorf("inspect container %s: %w", c.ID, err)
	}
	if d.State != docker.StateRunning || d.Pid <= 0 {
		return stats.Target{}, fmt.Errorf("container %s is not running: %w", c.ID, cerrdefs.ErrNotFound)
	}
	r := d.Resources
	t := stats.Target{
		ContainerID: c.ID, ContainerName: md.GetName(), Name: c.Name, Image: c.Image,
		PodName: pod.GetName(), PodNamespace: pod.GetNamespace(), Pid: d.Pid, StartedAt: d.StartedAt,
		Spec: stats.Limits{
			CPUPeriod: r.CPUPeriod, CPUQuota: r.CPUQuota, CPUShares: r.CPUShares,
			MemoryLimit: r.MemoryLimit, MemorySwap: r.MemorySwap,
		},
		FsPath: fsPath,
	}
	if s.deps.Layers != nil {
		if m, ok := s.deps.Layers.Get(c.ID, d.Pid, d.UpperDir, time.Now()); ok {
			t.WritableBytes, t.WritableKnown = m.Bytes, true
			return t, nil
		}
	}
	if c.SizeRw >= 0 {
		t.WritableBytes, t.WritableKnown = uint64(c.SizeRw), true
	}
	return t, nil
}
