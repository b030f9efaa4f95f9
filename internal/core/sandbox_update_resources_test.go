package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestUpdatePodSandboxResources(t *testing.T) {
	env := newRTEnv(t)
	sbID, cid := runningContainer(t, env)
	ctx := context.Background()
	before := env.spec(t, sbID).Resources
	resized := &runtimeapi.LinuxContainerResources{CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 256 << 20}
	_, err := env.svc.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{
		PodSandboxId: sbID, Resources: resized, Overhead: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 8 << 20},
	})
	assert.NilError(t, err)
	assert.DeepEqual(t, env.spec(t, sbID).Resources, before) // the pause container takes no pod limits

	for _, tc := range []struct {
		name    string
		req     *runtimeapi.UpdatePodSandboxResourcesRequest
		errKind func(error) bool
	}{
		{"unknown sandbox", &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "0123456789abcdef", Resources: resized}, cerrdefs.IsNotFound},
		{"a container", &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: cid, Resources: resized}, cerrdefs.IsNotFound},
		{"bad swap", &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: sbID, Overhead: &runtimeapi.LinuxContainerResources{
			Unified: map[string]string{"memory.swap.max": "a lot"},
		}}, cerrdefs.IsInvalidArgument},
	} {
		_, err := env.svc.UpdatePodSandboxResources(ctx, tc.req)
		assert.Check(t, tc.errKind(err), "%s: %v", tc.name, err)
	}
}
