package core

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/core/imagecache"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

func TestRemoveImage(t *testing.T) {
	svc, fake := newTestService(t, func(c *pinner.Config) { c.Patterns = []string{"pinned"} })
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
	svc, fake := newTestService(t, func(c *pinner.Config) { c.Patterns = []string{"pinned"} })
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

// requestKey marks the contexts of a test's RPCs, so that the fake's reply hooks can
// tell the image cache's own engine calls from theirs.
type requestKey struct{}

// newCachedTestService is newTestService with the image cache in front of the fake,
// as the binary runs by default; it returns once the cache answers from its index.
func newCachedTestService(t *testing.T, images ...string) (*Service, *dockertest.Fake, *imagecache.Cache) {
	t.Helper()
	svc, fake := newTestService(t, nil)
	for i, tag := range images {
		fake.AddImage(testImage(i+1, tag))
	}
	cache := imagecache.New(fake, imagecache.Config{ResyncInterval: time.Hour, SettleDelay: time.Hour, RetryInterval: 10 * time.Millisecond}, logctx.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cache.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if info := cache.CacheInfo(); info["state"] != "live" || info["images"] != len(images) {
			return poll.Continue("image cache %v", info)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
	svc.deps.Docker = cache
	return svc, fake, cache
}

// critest's "should not fail on simultaneous RemoveImage calls", through the image
// cache: five RemoveImage of one image by ID at once. The engine answers NotFound to
// those that lost the race (success, as the CRI asks), and each of them, once it has
// returned, must find the image gone by ImageStatus (by ID and by tag) and ListImages,
// though the one that removed it has not returned and the delete's events are not
// applied yet.
func TestRemoveImageSimultaneousCalls(t *testing.T) {
	svc, fake, _ := newCachedTestService(t, "busybox:1.28", "keep:1")
	ctx := context.WithValue(context.Background(), requestKey{}, true)
	st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.28"}})
	assert.NilError(t, err)
	imageID := st.GetImage().GetId()
	assert.Equal(t, imageID, id(1))

	// The cache's event loop stalls on the delete's events until the test ends.
	fake.SetReplyHook("InspectImage", func(c context.Context) error {
		if c.Value(requestKey{}) == nil {
			<-c.Done()
			return c.Err()
		}
		return nil
	})
	// The first call removes the image; its answer is held until the others returned.
	removed, releaseWinner := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	fake.SetReplyHook("RemoveImage", func(context.Context) error {
		if first.CompareAndSwap(false, true) {
			close(removed)
			<-releaseWinner
		}
		return nil
	})
	gone := func(when string) {
		t.Helper()
		for _, ref := range []string{imageID, "busybox:1.28"} {
			st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			assert.Check(t, err)
			assert.Check(t, st.GetImage() == nil, "ImageStatus(%s) %s: %v", ref, when, st.GetImage().GetId())
		}
		list, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		assert.Check(t, err)
		for _, img := range list.GetImages() {
			assert.Check(t, img.Id != imageID, "ListImages %s: %v", when, img.RepoTags)
		}
	}
	remove := func() error {
		_, err := svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: imageID}})
		return err
	}
	winner := make(chan error, 1)
	go func() { winner <- remove() }()
	<-removed
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			assert.Check(t, remove())
			gone("after a call that lost the race returned")
		})
	}
	wg.Wait()
	close(releaseWinner)
	assert.NilError(t, <-winner)
	gone("after every call returned")
	st, err = svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "keep:1"}})
	assert.NilError(t, err)
	assert.Equal(t, st.GetImage().GetId(), id(2))
}
