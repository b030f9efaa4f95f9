package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// swapMaxKey is cgroup v2's swap limit (swap alone, not memory+swap): kubelet sets it in
// unified for its LimitedSwap and NoSwap behaviours on cgroup v2.
const swapMaxKey = "memory.swap.max"

// engineResources maps CRI resources onto the engine's (see resources), logging at
// warning level what the engine cannot apply.
func (s *Service) engineResources(ctx context.Context, r *runtimeapi.LinuxContainerResources) (docker.Resources, error) {
	out, notApplied, err := resources(r)
	if err != nil {
		return out, err
	}
	if len(notApplied) > 0 {
		s.logger(ctx).WithField("unified", notApplied).Warn("the engine cannot set these cgroup v2 settings; they are not applied")
	}
	return out, nil
}

// resources maps CRI resources onto the engine's. The engine's memory-swap limit is
// memory+swap, as memory_swap_limit_in_bytes is; unified["memory.swap.max"] is swap
// alone, so it becomes the memory limit plus that ("max": unlimited swap). The engine
// limits swap only along with memory, so a swap limit without a memory limit is not
// applied, nor is any other unified key (the engine has no setting for cgroup files by
// name, and kubelet sends some on every container, memory.oom.group for one): those are
// returned in notApplied, sorted, as "key=value". A swap setting that is not a number,
// or that disagrees with memory_swap_limit_in_bytes, is InvalidArgument.
func resources(r *runtimeapi.LinuxContainerResources) (out docker.Resources, notApplied []string, err error) {
	out = docker.Resources{
		CPUShares: r.GetCpuShares(), CPUPeriod: r.GetCpuPeriod(), CPUQuota: r.GetCpuQuota(),
		CpusetCpus: r.GetCpusetCpus(), CpusetMems: r.GetCpusetMems(),
		MemoryLimit: r.GetMemoryLimitInBytes(), MemorySwap: r.GetMemorySwapLimitInBytes(),
		Unified: r.GetUnified(),
	}
	for k, v := range r.GetUnified() {
		if k != swapMaxKey {
			notApplied = append(notApplied, k+"="+v)
			continue
		}
		total, ok, err := swapTotal(v, out.MemoryLimit)
		switch {
		case err != nil:
			return out, nil, err
		case !ok:
			notApplied = append(notApplied, k+"="+v+" (no memory limit)")
		case out.MemorySwap != 0 && out.MemorySwap != total:
			return out, nil, fmt.Errorf("memory_swap_limit_in_bytes %d and unified[%s] %q (memory+swap %d) disagree: %w",
				out.MemorySwap, swapMaxKey, v, total, cerrdefs.ErrInvalidArgument)
		default:
			out.MemorySwap = total
		}
	}
	slices.Sort(notApplied)
	if out.MemorySwap == 0 && out.MemoryLimit > 0 {
		out.MemorySwap = out.MemoryLimit // no swap beyond the limit, as kubelet expects without swap support
	}
	return out, notApplied, nil
}

// swapTotal is the engine's memory+swap limit for memory.swap.max value v over a memory
// limit of memory bytes (0: none); ok is false when the engine cannot express it.
func swapTotal(v string, memory int64) (total int64, ok bool, err error) {
	if v == "max" {
		return -1, true, nil
	}
	swap, err := strconv.ParseInt(v, 10, 64)
	if err != nil || swap < 0 {
		return 0, false, fmt.Errorf("unified[%s] %q is neither a byte count nor \"max\": %w", swapMaxKey, v, cerrdefs.ErrInvalidArgument)
	}
	if memory <= 0 {
		return 0, false, nil
	}
	return memory + swap, true, nil
}
