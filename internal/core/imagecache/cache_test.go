package imagecache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

var id = dockertest.ImageID

// img is dockertest.Image of n bytes (sizes add up in the disk usage tests), with a user.
func img(n int, tags ...string) docker.Image {
	i := dockertest.Image(n, tags...)
	i.Size, i.User = int64(n), "1000"
	return i
}

// startCache runs a cache over fake with cfg until the test ends.
func startCache(t *testing.T, fake *dockertest.Fake, cfg Config) *Cache {
	t.Helper()
	c := New(fake, cfg, logctx.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// startFilled starts a cache with cfg over a fake engine holding images and waits
// until its index matches the engine.
func startFilled(t *testing.T, cfg Config, images ...docker.Image) (*dockertest.Fake, *Cache) {
	t.Helper()
	fake := dockertest.New()
	for _, im := range images {
		fake.AddImage(im)
	}
	c := startCache(t, fake, cfg)
	waitConsistent(t, c, fake)
	return fake, c
}

func fastConfig() Config {
	return Config{ResyncInterval: time.Hour, RetryInterval: 10 * time.Millisecond, EventReplay: time.Second, SettleDelay: time.Hour, FsUsageMaxAge: time.Hour}
}

// view is a comparable form of a list: ID -> sorted tags and digests, size.
func view(imgs []docker.Image) map[string]string {
	out := map[string]string{}
	for _, i := range imgs {
		tags := slices.Sorted(slices.Values(i.RepoTags))
		digests := slices.Sorted(slices.Values(i.RepoDigests))
		out[i.ID] = fmt.Sprintf("%v %v %d", tags, digests, i.Size)
	}
	return out
}

// waitConsistent polls until the cache is live and lists exactly what the engine lists
// (from its index: not live, it would answer from the engine).
func waitConsistent(t *testing.T, c *Cache, fake *dockertest.Fake) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if st := c.CacheInfo()["state"]; st != "live" {
			return poll.Continue("state %v", st)
		}
		got, err := c.ListImages(context.Background())
		if err != nil {
			return poll.Continue("cache: %v", err)
		}
		want, err := fake.ListImages(context.Background())
		if err != nil {
			return poll.Error(err)
		}
		if fmt.Sprint(view(got)) != fmt.Sprint(view(want)) {
			return poll.Continue("cache %v\nengine %v", view(got), view(want))
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(5*time.Millisecond))
}

func TestCacheServesListsWithoutEngineCalls(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(1, "a:1"), img(2, "b:1", "b:2"))
	before := fake.Calls("ListImages")
	for i := 0; i < 20; i++ {
		_, err := c.ListImages(context.Background())
		assert.NilError(t, err)
	}
	assert.Equal(t, fake.Calls("ListImages"), before, "live lists must not reach the engine")
	assert.Equal(t, c.CacheInfo()["state"], "live")
}

func TestCacheFollowsEvents(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(1, "a:1"))

	fake.AddImage(img(2, "b:1"))
	waitConsistent(t, c, fake)
	assert.NilError(t, fake.Tag("b:1", "a:1")) // the tag moves: image 1 gets no event of its own
	waitConsistent(t, c, fake)
	assert.NilError(t, fake.Untag("b:1"))
	waitConsistent(t, c, fake)
	assert.NilError(t, fake.RemoveImage(context.Background(), id(1)))
	waitConsistent(t, c, fake)
}

func TestCacheResyncRepairsMissedEvents(t *testing.T) {
	cfg := fastConfig()
	cfg.ResyncInterval = 50 * time.Millisecond
	fake, c := startFilled(t, cfg, img(1, "a:1"))
	fake.QuietTag("a:1", "quiet:1") // no event: only the periodic resync can see it
	waitConsistent(t, c, fake)
}

func TestCacheSettlesAfterEvents(t *testing.T) {
	cfg := fastConfig()
	cfg.SettleDelay = 20 * time.Millisecond
	cfg.EventReplay = 0 // no replayed event may refresh image 1: only a resync can show quiet:1
	fake, c := startFilled(t, cfg, img(1, "a:1"))
	resyncs := c.CacheInfo()["resyncs"].(int)
	fake.QuietTag("a:1", "quiet:1") // what only a full list shows
	fake.AddImage(img(2, "b:1"))    // an event: a background resync follows it
	waitConsistent(t, c, fake)
	// The resync's count is taken after it applied the list: wait for it, not just the list.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := c.CacheInfo()["resyncs"].(int); n <= resyncs {
			return poll.Continue("resyncs %d", n)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second))
}

func TestCacheStreamLossFallsBackAndResyncs(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(1, "a:1"))

	fake.BreakEvents(fmt.Errorf("stream reset: %w", cerrdefs.ErrUnavailable))
	fake.QuietTag("a:1", "while-down:1") // missed: the reconnect's resync must catch it
	waitConsistent(t, c, fake)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if c.CacheInfo()["state"] != "live" {
			return poll.Continue("state %v", c.CacheInfo()["state"])
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second))
	assert.Check(t, c.CacheInfo()["reconnects"].(int) >= 1)
}

func TestCacheEngineOutage(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(1, "a:1"))

	fake.SetDown(true)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		_, err := c.ListImages(context.Background())
		if !cerrdefs.IsUnavailable(err) {
			return poll.Continue("ListImages with the engine down: %v", err)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second))
	info := c.CacheInfo()
	assert.Equal(t, info["state"], "fallback")
	assert.Check(t, info["fallbackReason"] != "")

	fake.SetDown(false)
	fake.AddImage(img(2, "after:1"))
	waitConsistent(t, c, fake)
}

func TestCacheReadYourWrites(t *testing.T) {
	fake := dockertest.New()
	fake.AddRemote("pulled:1", img(5))
	fake.AddImage(img(1, "a:1"))
	c := startCache(t, fake, fastConfig())
	waitConsistent(t, c, fake)
	ctx := context.Background()

	assert.NilError(t, c.PullImage(ctx, "pulled:1", docker.PullOptions{}))
	list, err := c.ListImages(ctx)
	assert.NilError(t, err)
	assert.Check(t, view(list)[id(5)] != "", "pulled image must be listed at once")

	assert.NilError(t, c.RemoveImage(ctx, "a:1"))
	list, err = c.ListImages(ctx)
	assert.NilError(t, err)
	assert.Check(t, view(list)[id(1)] == "", "removed image must be gone at once")
}

// An image removed by another client between the pull and the cache's refresh: the
// pull still succeeded, and the index agrees with the engine that it is gone.
func TestCachePullOfAnImageRemovedAtOnce(t *testing.T) {
	fake := dockertest.New()
	fake.AddRemote("pulled:1", img(5))
	c := startCache(t, fake, fastConfig())
	waitConsistent(t, c, fake)
	ctx := context.Background()
	fake.InjectError("InspectImage", fmt.Errorf("no such image: %w", cerrdefs.ErrNotFound)) // as if removed
	assert.NilError(t, c.PullImage(ctx, "pulled:1", docker.PullOptions{}))
	fake.InjectError("InspectImage", nil)
	assert.NilError(t, fake.RemoveImage(ctx, "pulled:1"))
	list, err := c.ListImages(ctx)
	assert.NilError(t, err)
	assert.Check(t, view(list)[id(5)] == "", "a removed image must not be listed")
}

func TestCacheInspectResolves(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), docker.Image{ID: id(1), RepoTags: []string{"busybox:latest", "registry.k8s.io/pause:3.10"}, RepoDigests: []string{"busybox@" + id(9)}, User: "1000"})
	ctx := context.Background()
	for _, ref := range []string{id(1), strings.TrimPrefix(id(1), "sha256:"), id(1)[7:19], "busybox", "docker.io/library/busybox:latest", "registry.k8s.io/pause:3.10", "busybox@" + id(9)} {
		got, err := c.InspectImage(ctx, ref)
		assert.NilError(t, err, ref)
		assert.Equal(t, got.ID, id(1), ref)
		assert.Equal(t, got.User, "1000", ref)
	}
	calls := fake.Calls("InspectImage")
	_, err := c.InspectImage(ctx, "busybox")
	assert.NilError(t, err)
	assert.Equal(t, fake.Calls("InspectImage"), calls, "an inspected image is answered from the index")
	_, err = c.InspectImage(ctx, "missing:1")
	assert.Check(t, cerrdefs.IsNotFound(err))
}

// TestCacheRandomizedConsistency mixes a few hundred engine-side and cache-side image
// operations and checks the cache converges to the engine's list exactly.
func TestCacheRandomizedConsistency(t *testing.T) {
	fake := dockertest.New()
	c := startCache(t, fake, fastConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for n := 0; n < 60; n++ {
		fake.AddRemote(fmt.Sprintf("remote/img-%d:1", n), img(1000+n))
	}
	for op := 0; op < 300; op++ {
		n := rng.IntN(40)
		tag := fmt.Sprintf("repo-%d:%d", rng.IntN(10), rng.IntN(3))
		switch rng.IntN(6) {
		case 0:
			fake.AddImage(img(n, tag))
		case 1:
			_ = fake.Tag(tag, fmt.Sprintf("other-%d:1", rng.IntN(10)))
		case 2:
			_ = fake.RemoveImage(ctx, tag)
		case 3:
			_ = c.PullImage(ctx, fmt.Sprintf("remote/img-%d:1", rng.IntN(60)), docker.PullOptions{})
		case 4:
			_ = c.RemoveImage(ctx, tag)
		case 5:
			_ = fake.Untag(tag)
		}
	}
	waitConsistent(t, c, fake)
}

func TestCacheServesDiskUsageAndRefreshesAfterChanges(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(100, "a:1"))
	ctx := context.Background()

	first, err := c.ImageFsUsage(ctx)
	assert.NilError(t, err)
	assert.Equal(t, first.UsedBytes, uint64(100))
	// The event replay at start (the last second, which holds a:1's own event) may mark
	// the first value stale once, after the test started: wait until that event is
	// applied and the recomputation it started, if any, ended.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n, _ := c.CacheInfo()["events"].(int); n < 1 {
			return poll.Continue("the replayed event is not applied yet")
		}
		if _, err := c.ImageFsUsage(ctx); err != nil {
			return poll.Error(err)
		}
		c.fs.mu.Lock()
		defer c.fs.mu.Unlock()
		if c.fs.inflight != nil || c.fs.valChanges != c.fs.changes {
			return poll.Continue("the disk usage is being recomputed")
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(time.Millisecond))
	calls := fake.Calls("ImageFsUsage")
	assert.Check(t, calls <= 2, "%d engine calls at start", calls)
	for i := 0; i < 10; i++ {
		got, err := c.ImageFsUsage(ctx)
		assert.NilError(t, err)
		assert.Equal(t, got.UsedBytes, uint64(100))
	}
	assert.Equal(t, fake.Calls("ImageFsUsage"), calls, "unchanged images: no engine call")

	fake.AddImage(img(50, "b:1")) // an event: the next answer triggers a background recompute
	waitConsistent(t, c, fake)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		got, err := c.ImageFsUsage(ctx)
		if err != nil {
			return poll.Error(err)
		}
		if got.UsedBytes != 150 {
			return poll.Continue("used %d", got.UsedBytes)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(5*time.Millisecond))
}

// TestCacheComputesDiskUsageAtStart: the usage is computed beside the first fill, so
// ImageFsInfo answers from memory: with the engine's disk usage call hanging from then
// on, answers still come at once.
func TestCacheComputesDiskUsageAtStart(t *testing.T) {
	fake, c := startFilled(t, fastConfig(), img(100, "a:1"))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if info := c.CacheInfo(); info["diskUsageAt"] == nil || info["state"] != "live" {
			return poll.Continue("not computed yet: %v", info)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(time.Millisecond))
	release := make(chan struct{})
	defer close(release)
	fake.SetReplyHook("ImageFsUsage", func(context.Context) error { <-release; return nil })
	for range 5 {
		got, err := c.ImageFsUsage(request(t))
		assert.NilError(t, err)
		assert.Equal(t, got.UsedBytes, uint64(100))
	}
}
