package core

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// The NRI views of sandboxes and containers: what plugins are shown, built from the
// CRI config at creation and from the engine's container afterwards.

// nriPodOfConfig is the NRI view of a sandbox being run.
func nriPodOfConfig(id string, pid int, cfg *runtimeapi.PodSandboxConfig, handler string, ips []string) *nriapi.PodSandbox {
	md := cfg.GetMetadata()
	return &nriapi.PodSandbox{
		Id: id, Name: md.GetName(), Uid: md.GetUid(), Namespace: md.GetNamespace(),
		Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(), RuntimeHandler: handler,
		Linux: &nriapi.LinuxPodSandbox{CgroupParent: cfg.GetLinux().GetCgroupParent()},
		Pid:   uint32(max(pid, 0)), Ips: ips,
	}
}

// nriPod is the NRI view of sandbox sb (only its ID when its name is not ours).
func nriPod(sb docker.ContainerDetails, ips []string) *nriapi.PodSandbox {
	pod := &nriapi.PodSandbox{Id: sb.ID, RuntimeHandler: sb.Runtime, Pid: uint32(max(sb.Pid, 0)), Ips: ips}
	if md, err := sandboxMetadata(sb.Container); err == nil {
		pod.Name, pod.Uid, pod.Namespace = md.GetName(), md.GetUid(), md.GetNamespace()
	}
	pod.Labels, pod.Annotations = splitLabels(sb.Labels)
	return pod
}

// nriContainerOfSpec is the NRI view of a container being created from spec.
func nriContainerOfSpec(id, sandboxID string, cfg *runtimeapi.ContainerConfig, spec docker.ContainerSpec) *nriapi.Container {
	c := &nriapi.Container{
		Id: id, PodSandboxId: sandboxID, Name: cfg.GetMetadata().GetName(), State: nriapi.ContainerState_CONTAINER_CREATED,
		Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(),
		Args: append(append([]string{}, spec.Entrypoint...), spec.Cmd...), Env: append([]string{}, spec.Env...),
		Mounts: nriMounts(spec.Mounts), Rlimits: nriRlimits(spec.Resources.Ulimits),
		Linux: &nriapi.LinuxContainer{
			Resources:   nriResources(spec.Resources),
			OomScoreAdj: nriapi.Int(spec.OomScoreAdj),
			Devices:     nriDevices(spec.Devices),
		},
	}
	for _, d := range spec.CDIDevices {
		c.CDIDevices = append(c.CDIDevices, &nriapi.CDIDevice{Name: d})
	}
	return c
}

// nriContainer is the NRI view of engine container c.
func nriContainer(c docker.ContainerDetails) *nriapi.Container {
	out := &nriapi.Container{
		Id: c.ID, PodSandboxId: c.Labels[labelSandboxID], Name: c.Labels[labelContainerName], State: nriContainerState(c.State),
		Args: append(append([]string{}, c.Entrypoint...), c.Cmd...), Env: c.Env, Mounts: nriMounts(c.Mounts),
		Pid:       uint32(max(c.Pid, 0)),
		CreatedAt: nanos(c.Created), StartedAt: nanos(c.StartedAt), FinishedAt: nanos(c.FinishedAt),
		ExitCode: int32(c.ExitCode),
		Linux:    &nriapi.LinuxContainer{Resources: nriResources(c.Resources)},
		Rlimits:  nriRlimits(c.Resources.Ulimits),
	}
	if md, err := containerMetadata(c.Container); err == nil {
		out.Name = md.GetName()
	}
	out.Labels, out.Annotations = splitLabels(c.Labels)
	return out
}

func nriContainerState(state string) nriapi.ContainerState {
	switch state {
	case docker.StateCreated:
		return nriapi.ContainerState_CONTAINER_CREATED
	case docker.StateRunning, docker.StateRestarting:
		return nriapi.ContainerState_CONTAINER_RUNNING
	case docker.StatePaused:
		return nriapi.ContainerState_CONTAINER_PAUSED
	case docker.StateExited, docker.StateDead:
		return nriapi.ContainerState_CONTAINER_STOPPED
	}
	return nriapi.ContainerState_CONTAINER_UNKNOWN
}

func nriMounts(ms []docker.Mount) []*nriapi.Mount {
	out := make([]*nriapi.Mount, 0, len(ms))
	for _, m := range ms {
		opts := []string{"rbind"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		if m.Propagation != "" {
			opts = append(opts, m.Propagation)
		}
		out = append(out, &nriapi.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: opts})
	}
	return out
}

func nriRlimits(us []docker.Ulimit) []*nriapi.POSIXRlimit {
	out := make([]*nriapi.POSIXRlimit, 0, len(us))
	for _, u := range us {
		out = append(out, &nriapi.POSIXRlimit{Type: "RLIMIT_" + strings.ToUpper(u.Name), Hard: uint64(max(u.Hard, 0)), Soft: uint64(max(u.Soft, 0))})
	}
	return out
}

func nriDevices(ds []docker.Device) []*nriapi.LinuxDevice {
	out := make([]*nriapi.LinuxDevice, 0, len(ds))
	for _, d := range ds {
		out = append(out, &nriapi.LinuxDevice{Path: d.PathInContainer})
	}
	return out
}

// nriResources is the NRI view of engine resources (zero: unset).
func nriResources(r docker.Resources) *nriapi.LinuxResources {
	out := &nriapi.LinuxResources{Cpu: &nriapi.LinuxCPU{Cpus: r.CpusetCpus, Mems: r.CpusetMems}, Memory: &nriapi.LinuxMemory{}, Unified: r.Unified}
	if r.CPUShares > 0 {
		out.Cpu.Shares = nriapi.UInt64(uint64(r.CPUShares))
	}
	if r.CPUQuota != 0 {
		out.Cpu.Quota = nriapi.Int64(r.CPUQuota)
	}
	if r.CPUPeriod > 0 {
		out.Cpu.Period = nriapi.UInt64(uint64(r.CPUPeriod))
	}
	if r.MemoryLimit != 0 {
		out.Memory.Limit = nriapi.Int64(r.MemoryLimit)
	}
	if r.MemorySwap != 0 {
		out.Memory.Swap = nriapi.Int64(r.MemorySwap)
	}
	if r.PidsLimit != 0 {
		out.Pids = &nriapi.LinuxPids{Limit: r.PidsLimit}
	}
	return out
}

// nriCRIResources is the NRI view of the resources of an UpdateContainerResources.
func nriCRIResources(r *runtimeapi.LinuxContainerResources) *nriapi.LinuxResources {
	out := &nriapi.LinuxResources{
		Cpu: &nriapi.LinuxCPU{Cpus: r.GetCpusetCpus(), Mems: r.GetCpusetMems()}, Memory: &nriapi.LinuxMemory{}, Unified: r.GetUnified(),
	}
	if v := r.GetCpuShares(); v > 0 {
		out.Cpu.Shares = nriapi.UInt64(uint64(v))
	}
	if v := r.GetCpuQuota(); v != 0 {
		out.Cpu.Quota = nriapi.Int64(v)
	}
	if v := r.GetCpuPeriod(); v > 0 {
		out.Cpu.Period = nriapi.UInt64(uint64(v))
	}
	if v := r.GetMemoryLimitInBytes(); v != 0 {
		out.Memory.Limit = nriapi.Int64(v)
	}
	if v := r.GetMemorySwapLimitInBytes(); v != 0 {
		out.Memory.Swap = nriapi.Int64(v)
	}
	for _, h := range r.GetHugepageLimits() {
		out.HugepageLimits = append(out.HugepageLimits, &nriapi.HugepageLimit{PageSize: h.GetPageSize(), Limit: h.GetLimit()})
	}
	return out
}

// nriTarget returns the NRI views of engine container c and of its sandbox, for
// relaying an event about it; the sandbox may be gone (its ID alone then).
func (s *Service) nriTarget(ctx context.Context, c docker.ContainerDetails) (*nriapi.PodSandbox, *nriapi.Container) {
	sbID := c.Labels[labelSandboxID]
	if sbID == "" {
		return &nriapi.PodSandbox{}, nriContainer(c)
	}
	sb, err := s.deps.Docker.InspectContainer(ctx, sbID)
	if err != nil {
		return &nriapi.PodSandbox{Id: sbID}, nriContainer(c)
	}
	return nriPod(sb, nil), nriContainer(c)
}

// nriError marks a plugin's refusal of a lifecycle event: the request fails, kubelet
// retries.
func nriError(event, id string, err error) error {
	if cerrdefs.IsCanceled(err) || cerrdefs.IsDeadlineExceeded(err) {
		return fmt.Errorf("NRI %s of %s: %w", event, id, err)
	}
	return fmt.Errorf("NRI %s of %s: %w: %w", event, id, err, cerrdefs.ErrFailedPrecondition)
}
