//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listView is ListImages in a comparable form: ID -> tags, digests, size, pinned.
func listView(ctx context.Context, s *shim) (map[string]string, error) {
	resp, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(resp.Images))
	for _, img := range resp.Images {
		out[img.Id] = fmt.Sprintf("tags=%v digests=%v size=%d pinned=%v",
			slices.Sorted(slices.Values(img.RepoTags)), slices.Sorted(slices.Values(img.RepoDigests)), img.Size, img.Pinned)
	}
	return out, nil
}

// waitSameList polls until the cached shim lists exactly what the uncached one does.
func waitSameList(t *testing.T, cached, uncached *shim) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		got, err := listView(context.Background(), cached)
		if err != nil {
			return poll.Continue("cached: %v", err)
		}
		want, err := listView(context.Background(), uncached)
		if err != nil {
			return poll.Continue("uncached: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return poll.Continue("cached list differs from the engine's:\n%s", diffViews(got, want))
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(50*time.Millisecond))
}

func diffViews(got, want map[string]string) string {
	var b strings.Builder
	for id, w := range want {
		if got[id] != w {
			fmt.Fprintf(&b, "  %s: cache %q, engine %q\n", id[:19], got[id], w)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			fmt.Fprintf(&b, "  %s: cache %q, engine has none\n", id[:19], g)
		}
	}
	return b.String()
}

// cacheFlags pin something by pattern so that pinned is part of the comparison; the
// periodic resync is an hour away, so only events can keep the cache current.
var cacheFlags = []string{"--pinned-images", "*cache-pin*", "--image-cache-resync", "1h"}

// TestImageCacheFreshness: changes made by another client reach crictl images through
// the event stream; each latency is logged (measured, not asserted).
func TestImageCacheFreshness(t *testing.T) {
	s := startShim(t, cacheFlags...)
	src := importImage(t, "e2e/cache-src:1")
	tarball := filepath.Join(t.TempDir(), "save.tar")
	docker(t, "save", "-o", tarball, "e2e/cache-src:1")

	ref := env.registry + "/" + env.store + "/cache-pull:1"
	importImage(t, ref)
	docker(t, "push", "-q", ref)
	docker(t, "rmi", ref)

	visible := func(what string, cond func(map[string]crictlImage) bool) {
		t.Helper()
		start := time.Now()
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if cond(s.crictlImages(t)) {
				return poll.Success()
			}
			return poll.Continue("%s not visible yet", what)
		}, poll.WithTimeout(30*time.Second), poll.WithDelay(20*time.Millisecond))
		t.Logf("%-8s visible in crictl images after %v", what, time.Since(start).Round(time.Millisecond))
	}
	hasTag := func(tag string) func(map[string]crictlImage) bool {
		return func(imgs map[string]crictlImage) bool {
			for _, img := range imgs {
				if slices.ContainsFunc(img.RepoTags, func(t string) bool { return strings.HasSuffix(t, tag) }) {
					return true
				}
			}
			return false
		}
	}
	docker(t, "pull", "-q", ref)
	visible("pull", hasTag("cache-pull:1"))
	docker(t, "tag", "e2e/cache-src:1", "e2e/cache-tagged:1")
	visible("tag", hasTag("e2e/cache-tagged:1"))
	docker(t, "rmi", "e2e/cache-tagged:1")
	visible("untag", func(imgs map[string]crictlImage) bool { return !hasTag("e2e/cache-tagged:1")(imgs) })
	docker(t, "rmi", "e2e/cache-src:1")
	visible("rmi", func(imgs map[string]crictlImage) bool { _, ok := imgs[src]; return !ok })
	docker(t, "load", "-q", "-i", tarball)
	visible("load", func(imgs map[string]crictlImage) bool { _, ok := imgs[src]; return ok })
	imported := importImage(t, "e2e/cache-pin-imported:1")
	visible("import", func(imgs map[string]crictlImage) bool { return imgs[imported].Pinned })
}

// TestImageCacheReadYourWrites: after our own PullImage or RemoveImage returns, the very
// next ListImages reflects it.
func TestImageCacheReadYourWrites(t *testing.T) {
	s := startShim(t, cacheFlags...)
	ctx := context.Background()
	ref := env.registry + "/" + env.store + "/cache-ryw:1"
	importImage(t, ref)
	docker(t, "push", "-q", ref)
	docker(t, "rmi", ref)
	for i := 0; i < 3; i++ {
		resp, err := s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)})
		assert.NilError(t, err)
		got, err := s.listPinned(ctx)
		assert.NilError(t, err)
		_, listed := got[resp.ImageRef]
		assert.Check(t, listed, "round %d: pulled image not in the next ListImages", i)

		_, err = s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(ref)})
		assert.NilError(t, err)
		got, err = s.listPinned(ctx)
		assert.NilError(t, err)
		_, listed = got[resp.ImageRef]
		assert.Check(t, !listed, "round %d: removed image still in the next ListImages", i)
	}
}

// TestImageCacheConsistency: after a randomized sequence of a few hundred image
// operations mixing the docker CLI and CRI calls, the cached ListImages equals the
// engine's list (an uncached shim) exactly: ids, tags, digests, sizes, pinned.
func TestImageCacheConsistency(t *testing.T) {
	cached := startShim(t, cacheFlags...)
	uncached := startShim(t, append([]string{"--image-cache=false"}, cacheFlags...)...)
	ctx := context.Background()
	ops := envInt("E2E_CACHE_OPS", 240)
	rng := rand.New(rand.NewPCG(7, uint64(len(env.store))))

	remotes := make([]string, 4)
	for i := range remotes {
		remotes[i] = fmt.Sprintf("%s/%s/cache-remote-%d:1", env.registry, env.store, i)
		importImage(t, remotes[i])
		docker(t, "push", "-q", remotes[i])
	}
	repos := []string{"e2e/cache-a", "e2e/cache-b", "e2e/cache-pin-c"}
	tag := func() string { return fmt.Sprintf("%s:%d", repos[rng.IntN(len(repos))], rng.IntN(3)) }
	counts := map[string]int{}
	for i := 0; i < ops; i++ {
		var op string
		switch rng.IntN(7) {
		case 0, 1:
			op = "docker import"
			importImage(t, tag())
		case 2:
			op = "docker tag"
			_, _ = dockerErr(nil, "tag", tag(), tag())
		case 3:
			op = "docker rmi"
			_, _ = dockerErr(nil, "rmi", tag())
		case 4:
			op = "cri pull"
			_, err := cached.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(remotes[rng.IntN(len(remotes))])})
			assert.NilError(t, err)
		case 5:
			op = "cri remove"
			_, err := cached.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(tag())})
			assert.NilError(t, err)
		case 6:
			op = "docker pull"
			_, _ = dockerErr(nil, "pull", "-q", remotes[rng.IntN(len(remotes))])
		}
		counts[op]++
		if i%60 == 59 {
			waitSameList(t, cached, uncached)
		}
	}
	waitSameList(t, cached, uncached)
	for _, r := range remotes {
		removeAtEnd(t, r)
	}
	t.Logf("%d operations: %v", ops, counts)
}

// TestImageCacheEngineRestart: the index resyncs after the engine restarts under it,
// and stays correct, without restarting our binary.
func TestImageCacheEngineRestart(t *testing.T) {
	cached := startShim(t, cacheFlags...)
	uncached := startShim(t, "--image-cache=false")
	importImage(t, "e2e/cache-restart-a:1")
	waitSameList(t, cached, uncached)

	_, err := hackOutput("engine.sh", "stop-dockerd")
	assert.NilError(t, err)
	_, err = hackOutput("engine.sh", "start-dockerd")
	assert.NilError(t, err)
	// Until the stream is back the cache answers from the engine; wait until the index
	// serves again, so that the comparison below checks the resynced index.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		st, err := cached.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
		if err != nil {
			return poll.Continue("status: %v", err)
		}
		if !strings.Contains(st.Info["imageCache"], `"state":"live"`) || strings.Contains(st.Info["imageCache"], `"reconnects":0`) {
			return poll.Continue("cache not live again after a reconnect: %s", st.Info["imageCache"])
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
	importImage(t, "e2e/cache-restart-b:1")
	waitSameList(t, cached, uncached)
}

// TestImageCacheDiskUsage: ImageFsInfo is served from the cache (the engine computes it
// as slowly as a full list) and follows image changes.
func TestImageCacheDiskUsage(t *testing.T) {
	s := startShim(t, cacheFlags...)
	ctx := context.Background()
	usage := func() uint64 {
		t.Helper()
		fs, err := s.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		assert.NilError(t, err)
		assert.Assert(t, len(fs.ImageFilesystems) == 1)
		return fs.ImageFilesystems[0].UsedBytes.Value
	}
	before := usage()
	importImage(t, "e2e/cache-du:1")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if after := usage(); after == before {
			return poll.Continue("image disk usage still %d after an import", after)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
	st, err := s.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	assert.Check(t, strings.Contains(st.Info["imageCache"], `"diskUsageRefreshes":`), st.Info["imageCache"])
}

// TestPullMovedTag: the registry moved a tag the engine holds to another image (a new
// ":latest", say); after our PullImage, the pulled ID and ImageStatus are the new image,
// every time (CreateContainer resolves the tag as ImageStatus does). The containerd store's events used to
// leave the tag on the old image in the cache for a moment, and PullImage answered with it.
func TestPullMovedTag(t *testing.T) {
	s := startShim(t)
	ctx := context.Background()
	repo := env.store + "/moved-tag"
	ref := env.registry + "/" + repo + ":t"
	// The same registry under another name: pushing through it leaves the engine's tag
	// where it is, as a push from another machine would.
	host, port, ok := strings.Cut(env.registry, ":")
	assert.Assert(t, ok && host == "127.0.0.1", "registry %s", env.registry)
	alias := "localhost:" + port + "/" + repo + ":t"
	srcs := []string{"e2e/moved-tag-a:1", "e2e/moved-tag-b:1", "e2e/moved-tag-c:1"}
	for _, src := range srcs {
		importImage(t, src)
	}
	removeAtEnd(t, ref, alias)
	seen := map[string]bool{}
	for i := range 9 {
		docker(t, "tag", srcs[i%len(srcs)], alias)
		docker(t, "push", "-q", alias)
		resp, err := s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)})
		assert.NilError(t, err)
		want := imageID(t, ref)
		seen[want] = true
		assert.Check(t, resp.ImageRef == want, "round %d: PullImage answered %s, the engine has %s", i, resp.ImageRef, want)
		st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(ref)})
		assert.NilError(t, err)
		assert.Check(t, st.GetImage().GetId() == want, "round %d: ImageStatus answered %s, the engine has %s", i, st.GetImage().GetId(), want)
	}
	for id := range seen {
		removeAtEnd(t, id)
	}
	assert.Check(t, len(seen) == len(srcs), "the tag moved between %d images", len(seen))
}
