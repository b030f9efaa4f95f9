package dockertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// twoContainers returns a fake engine with two running containers.
func twoContainers(t *testing.T) (f *dockertest.Fake, a, b string) {
	t.Helper()
	ctx := context.Background()
	f = dockertest.New()
	f.AddImage(docker.Image{ID: "sha256:" + fmt.Sprintf("%064d", 1), RepoTags: []string{"busybox:1"}})
	ids := make([]string, 2)
	for i, name := range []string{"a", "b"} {
		id, err := f.CreateContainer(ctx, docker.ContainerSpec{Name: name, Image: "busybox:1"})
		assert.NilError(t, err)
		assert.NilError(t, f.StartContainer(ctx, id))
		ids[i] = id
	}
	return f, ids[0], ids[1]
}

func TestInjectContainerError(t *testing.T) {
	ctx := context.Background()
	f, a, b := twoContainers(t)
	injected := fmt.Errorf("injected: %w", cerrdefs.ErrInternal)
	f.InjectContainerError("ContainerStats", a, injected)

	_, err := f.ContainerStats(ctx, a)
	assert.Check(t, errors.Is(err, injected), "got %v", err)
	_, err = f.ContainerStats(ctx, "a") // by name: the same container
	assert.Check(t, errors.Is(err, injected), "got %v", err)
	_, err = f.ContainerStats(ctx, b)
	assert.Check(t, err, "another container is not affected")
	_, err = f.InspectContainer(ctx, a)
	assert.Check(t, err, "another method is not affected")

	// An outage comes first; the fault stays until cleared.
	f.SetDown(true)
	_, err = f.ContainerStats(ctx, a)
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	f.SetDown(false)
	_, err = f.ContainerStats(ctx, a)
	assert.Check(t, errors.Is(err, injected), "got %v", err)

	f.InjectContainerError("ContainerStats", a, nil)
	_, err = f.ContainerStats(ctx, a)
	assert.NilError(t, err)
}

func TestRemoveBefore(t *testing.T) {
	ctx := context.Background()
	f, a, b := twoContainers(t)
	f.RemoveBefore("ContainerStats", a)
	listed, err := f.ListContainers(ctx, docker.ContainerFilter{})
	assert.NilError(t, err)
	assert.Equal(t, len(listed), 2, "still there until the call")

	_, err = f.ContainerStats(ctx, a)
	assert.Check(t, cerrdefs.IsNotFound(err), "got %v", err)
	assert.DeepEqual(t, f.ContainerIDs(), []string{b})
	_, err = f.InspectContainer(ctx, a)
	assert.Check(t, cerrdefs.IsNotFound(err), "gone for every method: %v", err)
	_, err = f.ContainerStats(ctx, b)
	assert.NilError(t, err)
}
