//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// swapLimit reads the running container id's swap limit from its cgroup, as swap alone
// ("max" when unlimited): memory.swap.max on cgroup v2, memory.memsw.limit_in_bytes
// (memory+swap) less memory.limit_in_bytes on v1.
func swapLimit(t *testing.T, id string) string {
	t.Helper()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		assert.NilError(t, err)
		return strings.TrimSpace(string(b))
	}
	for _, line := range strings.Split(containerProc(t, id, "cgroup"), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" && cgroupV2() {
			return read(filepath.Join("/sys/fs/cgroup", parts[2], "memory.swap.max"))
		}
		if parts[1] == "memory" {
			dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			total, err := strconv.ParseInt(read(filepath.Join(dir, "memory.memsw.limit_in_bytes")), 10, 64)
			assert.NilError(t, err)
			mem, err := strconv.ParseInt(read(filepath.Join(dir, "memory.limit_in_bytes")), 10, 64)
			assert.NilError(t, err)
			if total >= 1<<62 { // the kernel's "no limit", rounded to pages
				return "max"
			}
			return strconv.FormatInt(total-mem, 10)
		}
	}
	t.Fatalf("no memory cgroup for container %s", id)
	return ""
}

func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// TestMemorySwapLimits sets the CRI's swap settings as kubelet does (LimitedSwap and NoSwap
// through unified["memory.swap.max"] on cgroup v2, memory_swap_limit_in_bytes as
// memory+swap on v1) at creation and through UpdateContainerResources, and reads them
// back from the container's cgroup on this host.
func TestMemorySwapLimits(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil && !cgroupV2() {
		t.Skip("no swap accounting on this cgroup v1 host")
	}
	s, pod, podID := bridgePod(t, "swap")
	ctx := context.Background()
	const mem = 64 << 20
	cfg := httpdContainer("swap", "8080", "")
	cfg.Command = []string{"/pause"}
	cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": strconv.Itoa(32 << 20)},
	}
	id := startContainer(t, s, podID, pod, cfg)
	assert.Equal(t, swapLimit(t, id), strconv.Itoa(32<<20))
	unlimited := httpdContainer("unlimited", "8080", "")
	unlimited.Command = []string{"/pause"}
	unlimited.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "max"}}
	assert.Equal(t, swapLimit(t, startContainer(t, s, podID, pod, unlimited)), "max")

	for _, tc := range []struct {
		name string
		r    *runtimeapi.LinuxContainerResources
		want string
	}{
		{"memory+swap", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, MemorySwapLimitInBytes: mem + 16<<20}, strconv.Itoa(16 << 20)},
		{"no swap", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "0"}}, "0"},
	} {
		_, err := s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: tc.r})
		assert.NilError(t, err, tc.name)
		assert.Check(t, swapLimit(t, id) == tc.want, "%s: swap %s, want %s", tc.name, swapLimit(t, id), tc.want)
	}

	_, err := s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "1G"},
	}})
	assert.Equal(t, status.Code(err), codes.InvalidArgument, "%v", err)
	assert.ErrorContains(t, err, "memory.swap.max")
	// The engine applies unlimited swap only at creation.
	_, err = s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "max"},
	}})
	assert.Equal(t, status.Code(err), codes.Unimplemented, "%v", err)
	assert.Equal(t, swapLimit(t, id), "0", "a refused update changes nothing")
}
