package imagecache

import (
	"context"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// holdLists holds the cache's background lists after the engine served them: the
// first until release (reached is closed when it is held), later ones until their
// context ends, so that a test sees what the first one did.
func holdLists(fake *dockertest.Fake) (reached <-chan struct{}, release chan<- struct{}) {
	reachedCh, releaseCh := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	n := 0
	fake.SetReplyHook("ListImages", func(ctx context.Context) error {
		if isRequest(ctx) {
			return nil
		}
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(reachedCh)
			select {
			case <-releaseCh:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		<-ctx.Done()
		return ctx.Err()
	})
	return reachedCh, releaseCh
}

// resyncDuring starts a background resync (the settle after an event) and holds its
// list, taken from the engine before change runs; change's effect is applied from its
// events before the list is; it returns once the list has been applied.
func resyncDuring(t *testing.T, c *Cache, fake *dockertest.Fake, change func(), applied func([]docker.Image) bool) {
	t.Helper()
	reached, release := holdLists(fake)
	fake.AddImage(img(99, "trigger:1")) // an event: a settling resync follows
	<-reached
	resyncs := c.CacheInfo()["resyncs"].(int)
	change()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		list, err := c.ListImages(request(t))
		if err != nil {
			return poll.Error(err)
		}
		if !applied(list) {
			return poll.Continue("the change's events are not applied yet: %v", view(list))
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
	close(release)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := c.CacheInfo()["resyncs"].(int); n == resyncs {
			return poll.Continue("resyncs %d", n)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
}

// assertMatchesEngine checks the index lists what the engine lists, at once.
func assertMatchesEngine(t *testing.T, c *Cache, fake *dockertest.Fake) {
	t.Helper()
	assert.Equal(t, c.CacheInfo()["state"], "live")
	got, err := c.ListImages(request(t))
	assert.NilError(t, err)
	want, err := fake.ListImages(request(t))
	assert.NilError(t, err)
	assert.DeepEqual(t, view(got), view(want))
}

func settleConfig() Config {
	cfg := fastConfig()
	cfg.SettleDelay = time.Millisecond
	return cfg
}

// A resync whose list was taken before an image was deleted, and applied after the
// delete event was, must not bring the image back.
func TestCacheResyncKeepsDeleteAppliedDuringItsList(t *testing.T) {
	fake, c := startFilled(t, settleConfig(), img(1, "a:1"), img(2, "b:1"))
	resyncDuring(t, c, fake,
		func() { assert.NilError(t, fake.RemoveImage(context.Background(), id(1))) },
		func(list []docker.Image) bool { return view(list)[id(1)] == "" })
	assertMatchesEngine(t, c, fake)
}

// Nor may it give back a tag that an event applied meanwhile moved to another image,
// even when the index never knew the older image had it (a missed event): the engine
// sends no event for the image that lost the tag.
func TestCacheResyncKeepsTagMovedDuringItsList(t *testing.T) {
	fake, c := startFilled(t, settleConfig(), img(1, "a:1"), img(2, "b:1"))
	fake.QuietTag("a:1", "moved:1")
	resyncDuring(t, c, fake,
		func() { assert.NilError(t, fake.Tag("b:1", "moved:1")) },
		func(list []docker.Image) bool {
			return view(list)[id(2)] == view([]docker.Image{img(2, "b:1", "moved:1")})[id(2)]
		})
	assertMatchesEngine(t, c, fake)
}

// An inspect made for a request, answered by the engine before an image was deleted
// and written to the index after the delete event was applied, must not bring the
// image back.
func TestCacheRequestInspectKeepsDeleteAppliedMeanwhile(t *testing.T) {
	cfg := fastConfig()
	cfg.EventReplay = 0 // the fill's entries stay list-only: ImageStatus inspects
	fake, c := startFilled(t, cfg, img(1, "a:1"))

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fake.SetReplyHook("InspectImage", func(ctx context.Context) error {
		if isRequest(ctx) {
			once.Do(func() { close(reached); <-release })
		}
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.InspectImage(request(t), "a:1")
		done <- err
	}()
	<-reached
	assert.NilError(t, fake.RemoveImage(context.Background(), id(1)))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		list, err := c.ListImages(request(t))
		if err != nil {
			return poll.Error(err)
		}
		if view(list)[id(1)] != "" {
			return poll.Continue("delete not applied yet")
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
	close(release)
	assert.NilError(t, <-done) // the engine's answer when it was asked
	assertMatchesEngine(t, c, fake)
	_, err := c.InspectImage(request(t), "a:1")
	assert.ErrorContains(t, err, "no such image")
}

type slowKey struct{}

// Of two disk usage computations, the one started before an applied image change and
// answered last must not replace the later one, nor hide that the change is counted.
func TestCacheDiskUsageOlderAnswerDoesNotReplaceNewer(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(100, "a:1"))
	reached, release := make(chan struct{}), make(chan struct{})
	fake.SetReplyHook("ImageFsUsage", func(ctx context.Context) error {
		if ctx.Value(slowKey{}) != nil {
			close(reached)
			<-release
		}
		return nil
	})
	slow := make(chan uint64, 1)
	go func() {
		got, err := c.fetchFsUsage(context.WithValue(request(t), slowKey{}, true))
		assert.Check(t, err)
		slow <- got.UsedBytes
	}()
	<-reached // it counted image 100 only
	fake.AddImage(img(50, "b:1"))
	waitConsistent(t, c, fake)
	poll.WaitOn(t, func(poll.LogT) poll.Result { // recomputed in the background after the change
		got, err := c.ImageFsUsage(request(t))
		if err != nil {
			return poll.Error(err)
		}
		if got.UsedBytes != 150 {
			return poll.Continue("used %d", got.UsedBytes)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(time.Millisecond))
	close(release)
	assert.Equal(t, <-slow, uint64(100), "the engine's answer when it was asked")

	got, err := c.ImageFsUsage(request(t))
	assert.NilError(t, err)
	assert.Equal(t, got.UsedBytes, uint64(150))
}
