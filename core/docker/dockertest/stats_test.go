package dockertest_test

import (
	"context"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/core/docker"
)

func TestContainerStats(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})

	before := time.Now()
	s, err := f.ContainerStats(ctx, id)
	assert.NilError(t, err)
	assert.Assert(t, !s.Timestamp.Before(before))
	assert.Equal(t, s.CPUUsageNanos, uint64(0))

	want := docker.ContainerStats{
		Timestamp: time.Unix(1700000000, 0), CPUUsageNanos: 5, MemoryWorkingSetBytes: 100,
		Networks: map[string]docker.NetworkStats{"eth0": {RxBytes: 1}},
	}
	f.SetStats(id, want)
	s, err = f.ContainerStats(ctx, id)
	assert.NilError(t, err)
	assert.DeepEqual(t, s, want)
	s.Networks["eth0"] = docker.NetworkStats{}
	s, _ = f.ContainerStats(ctx, id)
	assert.DeepEqual(t, s, want)

	_, err = f.ContainerStats(ctx, "missing")
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)
}
