package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestResourcesSwap(t *testing.T) {
	const mem = 64 << 20
	for _, tc := range []struct {
		name       string
		in         *runtimeapi.LinuxContainerResources
		swap       int64
		notApplied []string
		invalid    bool
	}{
		{name: "no memory limit, no swap limit", in: &runtimeapi.LinuxContainerResources{}},
		{name: "memory limit alone: no swap", in: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem}, swap: mem},
		{
			name: "memory_swap_limit_in_bytes is memory+swap as the engine's",
			in:   &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, MemorySwapLimitInBytes: 2 * mem}, swap: 2 * mem,
		},
		{
			name: "memory.swap.max is swap alone",
			in:   &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "1048576"}},
			swap: mem + 1<<20,
		},
		{
			name: "NoSwap on cgroup v2",
			in:   &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "0"}},
			swap: mem,
		},
		{
			name: "unlimited swap",
			in:   &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "max"}},
			swap: -1,
		},
		{
			name: "both, agreeing",
			in: &runtimeapi.LinuxContainerResources{
				MemoryLimitInBytes: mem, MemorySwapLimitInBytes: mem + 4096, Unified: map[string]string{"memory.swap.max": "4096"},
			},
			swap: mem + 4096,
		},
		{
			name:       "swap limit without a memory limit is not applied",
			in:         &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "0"}},
			notApplied: []string{"memory.swap.max=0 (no memory limit)"},
		},
		{
			name: "other unified keys are not applied",
			in: &runtimeapi.LinuxContainerResources{
				MemoryLimitInBytes: mem, Unified: map[string]string{"memory.oom.group": "1", "memory.high": "40M", "memory.swap.max": "0"},
			},
			swap: mem, notApplied: []string{"memory.high=40M", "memory.oom.group=1"},
		},
		{
			name: "both, disagreeing", invalid: true,
			in: &runtimeapi.LinuxContainerResources{
				MemoryLimitInBytes: mem, MemorySwapLimitInBytes: 2 * mem, Unified: map[string]string{"memory.swap.max": "0"},
			},
		},
		{name: "not a number", invalid: true, in: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "1G"}}},
		{name: "negative", invalid: true, in: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, notApplied, err := resources(tc.in)
			if tc.invalid {
				assert.Assert(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
				assert.ErrorContains(t, err, "memory.swap.max")
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, out.MemorySwap, tc.swap)
			assert.DeepEqual(t, notApplied, tc.notApplied)
		})
	}
}

// TestSwapSettingsReachTheEngine checks both RPCs that take resources.
func TestSwapSettingsReachTheEngine(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cfg := rtContainerConfig("app")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: 64 << 20, Unified: map[string]string{"memory.swap.max": "max"},
	}}
	cid := env.createContainer(t, sbID, sbCfg, cfg)
	assert.Equal(t, env.spec(t, cid).Resources.MemorySwap, int64(-1))

	ctx := context.Background()
	_, err := env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: cid, Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, Unified: map[string]string{"memory.swap.max": "0"}},
	})
	assert.NilError(t, err)
	assert.Equal(t, env.spec(t, cid).Resources.MemorySwap, int64(64<<20))

	// The engine does not apply unlimited swap to a running container.
	for _, r := range []*runtimeapi.LinuxContainerResources{
		{MemoryLimitInBytes: 64 << 20, Unified: map[string]string{"memory.swap.max": "max"}},
		{MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: -1},
	} {
		_, err = env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: cid, Linux: r})
		assert.Check(t, cerrdefs.IsNotImplemented(err), "got %v", err)
	}
	assert.Equal(t, env.spec(t, cid).Resources.MemorySwap, int64(64<<20))

	_, err = env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: cid, Linux: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "lots"}},
	})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
	assert.Equal(t, env.spec(t, cid).Resources.MemorySwap, int64(64<<20), "a refused update changes nothing")

	cfg = rtContainerConfig("bad")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "-5"}}}
	_, err = env.svc.CreateContainer(ctx, rtCreateReq(sbID, sbCfg, cfg))
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
}
