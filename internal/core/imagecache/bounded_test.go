package imagecache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// requestKey marks a test's request contexts, so that reply hooks can hold only the
// calls the cache makes on its own.
type requestKey struct{}

func request(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), requestKey{}, true), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func isRequest(ctx context.Context) bool { return ctx.Value(requestKey{}) != nil }

// hold makes the background calls of method wait for release (or their context) after
// the engine served them; reached is closed when the first one is held.
func hold(fake *dockertest.Fake, method string, release <-chan struct{}) (reached <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	fake.SetReplyHook(method, func(ctx context.Context) error {
		if isRequest(ctx) {
			return nil
		}
		once.Do(func() { close(ch) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return ch
}

func waitState(t *testing.T, c *Cache, state, reason string) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		info := c.CacheInfo()
		if info["state"] != state || !strings.Contains(fmt.Sprint(info["fallbackReason"]), reason) {
			return poll.Continue("state %v (%v)", info["state"], info["fallbackReason"])
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
}

// A hung engine call the cache makes on its own fails at CallTimeout (a full list at
// ListTimeout): the cache falls back to the engine and is live again once the engine
// answers.
func TestCacheEngineCallsHaveDeadlines(t *testing.T) {
	for _, method := range []string{"Ping", "ListImages", "InspectImage"} { // InspectImage: behind a replayed event
		t.Run(method, func(t *testing.T) {
			fake := dockertest.New()
			fake.AddImage(img(1, "a:1"))
			cfg := fastConfig()
			cfg.CallTimeout, cfg.ListTimeout = 100*time.Millisecond, 100*time.Millisecond
			cfg.EventReplay = time.Hour        // every session replays image 1's events
			reached := hold(fake, method, nil) // never released: hung
			c := startCache(t, fake, cfg)
			<-reached
			waitState(t, c, "fallback", "deadline exceeded")
			fake.SetReplyHook(method, nil)
			waitConsistent(t, c, fake)
			waitState(t, c, "live", "")
		})
	}
}

func TestCacheDiskUsageRecomputationHasADeadline(t *testing.T) {
	cfg := fastConfig()
	cfg.ListTimeout = 100 * time.Millisecond
	fake, c := startFilled(t, cfg, img(100, "a:1"))
	ctx := request(t)
	_, err := c.ImageFsUsage(ctx)
	assert.NilError(t, err)

	reached := hold(fake, "ImageFsUsage", nil)
	fake.AddImage(img(50, "b:1"))
	waitConsistent(t, c, fake)
	got, err := c.ImageFsUsage(ctx) // stale: starts a recomputation, which hangs
	assert.NilError(t, err)
	assert.Equal(t, got.UsedBytes, uint64(100))
	<-reached
	fake.SetReplyHook("ImageFsUsage", nil)
	poll.WaitOn(t, func(poll.LogT) poll.Result { // the hung one gave up: a new one succeeds
		got, err := c.ImageFsUsage(ctx)
		if err != nil {
			return poll.Error(err)
		}
		if got.UsedBytes != 150 {
			return poll.Continue("used %d", got.UsedBytes)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(5*time.Millisecond))
}

// A full list slower than CallTimeout (10,000 images on the containerd store take
// the engine over 30 s) still fills the cache: lists are bounded by ListTimeout.
func TestCacheSlowListStillFills(t *testing.T) {
	fake := dockertest.New()
	fake.AddImage(img(1, "a:1"))
	cfg := fastConfig()
	cfg.CallTimeout, cfg.ListTimeout = 20*time.Millisecond, time.Minute
	release := make(chan struct{})
	reached := hold(fake, "ListImages", release)
	c := startCache(t, fake, cfg)
	<-reached
	time.Sleep(10 * cfg.CallTimeout) // the list outlives CallTimeout
	info := c.CacheInfo()
	assert.Check(t, info["state"] != "fallback", "the list was given up: %v (%v)", info["state"], info["fallbackReason"])
	close(release)
	waitState(t, c, "live", "")
	waitConsistent(t, c, fake)
}

// While the first fill is under way (a slow engine list), requests are answered by
// the engine instead of waiting; then from the index.
func TestCacheServesFromEngineWhileStarting(t *testing.T) {
	fake := dockertest.New()
	fake.AddImage(img(1, "a:1"))
	release := make(chan struct{})
	reached := hold(fake, "ListImages", release)
	c := startCache(t, fake, fastConfig())
	<-reached
	ctx := request(t)

	fake.AddImage(img(2, "b:1"))
	list, err := c.ListImages(ctx)
	assert.NilError(t, err)
	assert.DeepEqual(t, view(list), view([]docker.Image{img(1, "a:1"), img(2, "b:1")}))
	got, err := c.InspectImage(ctx, "b:1")
	assert.NilError(t, err)
	assert.Equal(t, got.ID, id(2))
	usage, err := c.ImageFsUsage(ctx)
	assert.NilError(t, err)
	assert.Equal(t, usage.UsedBytes, uint64(3))
	assert.Equal(t, c.CacheInfo()["state"], "starting")

	close(release) // the fill's list predates image 2: its event brings it
	waitConsistent(t, c, fake)
	assert.Equal(t, c.CacheInfo()["state"], "live")
	before := fake.Calls("ListImages")
	_, err = c.ListImages(ctx)
	assert.NilError(t, err)
	assert.Equal(t, fake.Calls("ListImages"), before, "live lists must not reach the engine")
}

// Before Run, requests are answered by the engine; once it runs, by the index.
func TestCacheBeforeRunAsksTheEngine(t *testing.T) {
	fake := dockertest.New()
	fake.AddImage(img(1, "a:1"))
	c := New(fake, fastConfig(), logctx.Discard())
	list, err := c.ListImages(context.Background()) // no deadline: it must not wait
	assert.NilError(t, err)
	assert.Equal(t, len(list), 1)
	assert.Equal(t, c.CacheInfo()["state"], "starting")

	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	waitConsistent(t, c, fake)
	waitState(t, c, "live", "")
	before := fake.Calls("ListImages")
	list, err = c.ListImages(context.Background())
	assert.NilError(t, err)
	assert.Equal(t, len(list), 1)
	assert.Equal(t, fake.Calls("ListImages"), before)
}

func TestConfigValidateAndDefaults(t *testing.T) {
	assert.NilError(t, DefaultConfig().Validate())
	assert.NilError(t, Config{}.Validate(), "zero values mean the defaults")
	for _, cfg := range []Config{{CallTimeout: -time.Second}, {ResyncInterval: -1}, {EventReplay: -1}} {
		assert.Check(t, cerrdefs.IsInvalidArgument(cfg.Validate()), "%+v", cfg)
	}
	got := Config{EventReplay: 0, CallTimeout: -1}.withDefaults()
	want := DefaultConfig()
	want.EventReplay = 0
	assert.Equal(t, got, want)
	assert.Equal(t, New(dockertest.New(), Config{}, nil).cfg.CallTimeout, 30*time.Second)
}
