package imagecache

import (
	"context"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// assertGone checks that the cache shows none of the image: not by ID, nor by any of
// refs, nor in its list.
func assertGone(t *testing.T, c *Cache, imgID string, refs ...string) {
	t.Helper()
	for _, ref := range append([]string{imgID}, refs...) {
		got, err := c.InspectImage(request(t), ref)
		assert.Check(t, cerrdefs.IsNotFound(err), "InspectImage(%s) after the removal returned: %v %v", ref, got.ID, err)
	}
	list, err := c.ListImages(request(t))
	assert.NilError(t, err)
	assert.Check(t, view(list)[imgID] == "", "ListImages after the removal returned: %v", view(list))
}

// holdEventLoop holds the answers of the event loop's inspects: the first until
// releaseFirst, later ones until the cache stops. first is closed when the first is
// held (the engine answered it), next when the second is (so the first was applied).
// A request's inspects pass through requests, when not nil.
func holdEventLoop(fake *dockertest.Fake, requests func(context.Context) error) (first, next <-chan struct{}, releaseFirst chan<- struct{}) {
	firstCh, nextCh, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	n := 0
	fake.SetReplyHook("InspectImage", func(ctx context.Context) error {
		if isRequest(ctx) {
			if requests != nil {
				return requests(ctx)
			}
			return nil
		}
		mu.Lock()
		n++
		nth := n
		mu.Unlock()
		switch nth {
		case 1:
			close(firstCh)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case 2:
			close(nextCh)
		}
		<-ctx.Done()
		return ctx.Err()
	})
	return firstCh, nextCh, release
}

// Several RemoveImage of one image at once (critest's "simultaneous RemoveImage
// calls"): the engine answers NotFound to the calls that lost the race, and the CRI's
// RemoveImage takes that as success. Once such a call returns, the cache must not show
// the image, though the delete's events are not applied yet and the call that won has
// not returned.
func TestCacheRemoveThatLostTheRaceDropsTheImage(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(1, "a:1"), img(2, "b:1"))
	_, err := c.InspectImage(request(t), "a:1") // its details indexed, as after ImageStatus
	assert.NilError(t, err)
	reached := hold(fake, "InspectImage", nil) // the event loop stalls on the delete's events
	assert.NilError(t, fake.RemoveImage(context.Background(), id(1)))
	<-reached

	err = c.RemoveImage(request(t), id(1))
	assert.Check(t, cerrdefs.IsNotFound(err), "the engine's answer: %v", err)
	assertGone(t, c, id(1), "a:1")
	_, err = c.InspectImage(request(t), "b:1")
	assert.NilError(t, err, "the other image stays")
}

// The event loop's inspect, answered before the image was removed and applied after
// RemoveImage returned, must not bring the image back: that answer is older than the
// removal the request saw.
func TestCacheRemoveKeepsOutAnEventAnswerFromBefore(t *testing.T) {
	cfg := fastConfig()
	cfg.EventReplay = 0 // only the tag event below reaches the event loop
	fake, c := startFilled(t, cfg, img(1, "a:1"))
	first, next, releaseFirst := holdEventLoop(fake, nil)
	assert.NilError(t, fake.Tag("a:1", "b:1")) // an event: the loop inspects image 1
	<-first                                    // answered: image 1 with a:1 and b:1

	assert.NilError(t, c.RemoveImage(request(t), id(1)))
	assertGone(t, c, id(1), "a:1", "b:1")
	close(releaseFirst)
	<-next // the old answer was applied (or dropped); the delete's events are not
	assertGone(t, c, id(1), "a:1", "b:1")
}

type removalKey struct{}

// Nor may such an answer, applied while the removal's own refresh was under way, keep
// that refresh from dropping the image.
func TestCacheRemoveDropsAnEventAnswerAppliedDuringIt(t *testing.T) {
	cfg := fastConfig()
	cfg.EventReplay = 0
	fake, c := startFilled(t, cfg, img(1, "a:1"))
	refreshing, releaseRefresh := make(chan struct{}), make(chan struct{})
	first, next, releaseFirst := holdEventLoop(fake, func(ctx context.Context) error {
		if ctx.Value(removalKey{}) != nil { // the removal's refresh, answered by the engine
			close(refreshing)
			<-releaseRefresh
		}
		return nil
	})
	assert.NilError(t, fake.Tag("a:1", "b:1"))
	<-first

	done := make(chan error, 1)
	go func() { done <- c.RemoveImage(context.WithValue(request(t), removalKey{}, true), id(1)) }()
	<-refreshing // the engine said the image is gone
	close(releaseFirst)
	<-next // the loop applied its older answer before the refresh wrote
	close(releaseRefresh)
	assert.NilError(t, <-done)
	assertGone(t, c, id(1), "a:1", "b:1")
}
