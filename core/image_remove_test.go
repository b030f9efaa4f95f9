package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/pinning"
)

func TestRemoveImage(t *testing.T) {
	svc, fake := newTestService(t, func(c *pinning.Config) { c.Patterns = []string{"pinned"} })
	fake.AddImage(testImage(1, "multi:1", "multi:2", "other/multi:3"))
	fake.AddImage(testImage(2, "pinned:1"))
	fake.AddImage(testImage(3, "keep:1"))
	ctx := context.Background()
	for _, ref := range []string{id(1), "pinned:1", "multi:1", "never-existed:1", id(99)} {
		_, err := svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		assert.NilError(t, err, ref)
	}
	list, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Images), 1)
	assert.Equal(t, list.Images[0].Id, id(3))

	_, err = svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "Bad Ref"}})
	assert.Check(t, cerrdefs.IsInvalidArgument(err))
	fake.SetDown(true)
	_, err = svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "keep:1"}})
	assert.Check(t, cerrdefs.IsUnavailable(err))
}

func TestRemoveImageRefusesPinned(t *testing.T) {
	svc, fake := newTestService(t, func(c *pinning.Config) { c.Patterns = []string{"pinned"} })
	svc.cfg.RefusePinnedRemoval = true
	fake.AddImage(testImage(2, "pinned:1"))
	fake.AddImage(testImage(3, "keep:1"))
	ctx := context.Background()
	_, err := svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "pinned:1"}})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, `pinned-images: pinned`))
	assert.Check(t, is.ErrorContains(err, `remove "pinned" from --pinned-images`))
	_, err = svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "keep:1"}})
	assert.NilError(t, err)
	list, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	assert.Equal(t, len(list.Images), 1)
	assert.Equal(t, list.Images[0].Id, id(2))
}
