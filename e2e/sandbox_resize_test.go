//go:build e2e

package e2e

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestUpdatePodSandboxResources: kubelet's in-place pod resize notice succeeds on a
// running pod (the pod cgroup is kubelet's; the containers are resized one by one), is
// NotFound for a pod that is not there and InvalidArgument for a swap setting the engine
// could not take.
func TestUpdatePodSandboxResources(t *testing.T) {
	s, pod, podID := bridgePod(t, "resize")
	cfg := httpdContainer("app", "8080", "")
	cfg.Command = []string{"/pause"}
	id := startContainer(t, s, podID, pod, cfg)
	ctx := context.Background()
	resized := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 128 << 20}
	_, err := s.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: podID, Resources: resized})
	assert.NilError(t, err)
	_, err = s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: resized})
	assert.NilError(t, err)
	st, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.NilError(t, err)
	assert.Equal(t, st.GetStatus().GetResources().GetLinux().GetMemoryLimitInBytes(), int64(128<<20))
	assert.Equal(t, podStatus(t, s, podID).GetState(), runtimeapi.PodSandboxState_SANDBOX_READY)

	_, err = s.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "0123456789abcdef", Resources: resized})
	assert.Equal(t, status.Code(err), codes.NotFound, "%v", err)
	_, err = s.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: podID, Resources: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: 128 << 20, Unified: map[string]string{"memory.swap.max": "lots"},
	}})
	assert.Equal(t, status.Code(err), codes.InvalidArgument, "%v", err)
}
