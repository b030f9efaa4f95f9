package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestUpdateContainerResources(t *testing.T) {
	env := newRTEnv(t)
	sbID, cid := runningContainer(t, env)
	ctx := context.Background()
	_, err := env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: cid,
		Linux: &runtimeapi.LinuxContainerResources{
			CpuShares: 1024, CpuQuota: 20000, CpuPeriod: 100000, CpusetCpus: "1", MemoryLimitInBytes: 512 << 20,
			Unified: map[string]string{"memory.high": "400M"},
		},
	})
	assert.NilError(t, err)
	want := docker.Resources{
		CPUShares: 1024, CPUQuota: 20000, CPUPeriod: 100000, CpusetCpus: "1",
		MemoryLimit: 512 << 20, MemorySwap: 512 << 20, Unified: map[string]string{"memory.high": "400M"},
	}
	assert.DeepEqual(t, env.inspect(t, cid).Resources, want, cmpopts.EquateEmpty())
	assert.DeepEqual(t, env.spec(t, cid).Resources, want, cmpopts.EquateEmpty())

	st := containerStatus(t, env, cid, false).Status
	assert.Equal(t, st.Resources.Linux.CpuShares, int64(1024))
	assert.Equal(t, st.Resources.Linux.MemoryLimitInBytes, int64(512<<20))

	// No Linux resources: nothing changes.
	_, err = env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.DeepEqual(t, env.inspect(t, cid).Resources, want, cmpopts.EquateEmpty())

	for _, bad := range []string{"0123456789abcdef", sbID} {
		_, err = env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
			ContainerId: bad, Linux: &runtimeapi.LinuxContainerResources{CpuShares: 2},
		})
		assert.Check(t, cerrdefs.IsNotFound(err), "%s: %v", bad, err)
	}
	env.engine.InjectError("UpdateContainerResources", cerrdefs.ErrUnavailable)
	_, err = env.svc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: cid, Linux: &runtimeapi.LinuxContainerResources{CpuShares: 2},
	})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}
