//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// startProxyBackend starts the node's proxyBackend with the node's pod flags (CNI, root, sandbox
// image) on a socket of its own, and returns our binary's flags as the pin proxy in front of it.
func (n *node) startProxyBackend(t *testing.T) []string {
	t.Helper()
	flags := append(n.pn.flags(filepath.Join(t.TempDir(), "backend-root")), "--log-level", "info")
	n.backend = startShimBin(t, n.opts.proxyBackend[0], append(flags, n.opts.proxyBackend[1:]...)...)
	return append([]string{"--pin-proxy-backend", n.backend.endpoint, "--pod-infra-container-image", pauseRef,
		"--log-level", "info"}, n.opts.shimFlags...)
}

// TestNodeImageGCThroughProxy: kubelet talks to our binary as the pin proxy, in front of a
// cri-dockerd that pins nothing but its sandbox image (upstream's own build; ours with its pin
// sources off). kubelet's image GC (eviction mode, as TestNodeImageGC) must keep every image one of
// the proxy's pin sources pins, which the backend alone lists unpinned, and remove an unpinned
// unused one; a static pod then runs through the proxy.
func TestNodeImageGCThroughProxy(t *testing.T) {
	requireNode(t)
	pauseImage(t)
	eachBackend(t, func(t *testing.T, b backend) {
		dir := t.TempDir()
		pinsFile := filepath.Join(dir, "pins")
		assert.NilError(t, os.WriteFile(pinsFile, []byte("node/proxy-gc-file:1\n"), 0o644))
		preloadDir := filepath.Join(dir, "preload")
		assert.NilError(t, os.Mkdir(preloadDir, 0o755))
		pins := map[string]string{
			"--pinned-images":    importImage(t, "node/proxy-gc-flag:1"),
			"pins file":          importImage(t, "node/proxy-gc-file:1"),
			"image-config label": importImage(t, "node/proxy-gc-label:1", pinLabel+"=pinned"),
			"preload archive":    importImage(t, "node/proxy-gc-preload:1"),
		}
		docker(t, "save", "-o", filepath.Join(preloadDir, "gc.tar"), "node/proxy-gc-preload:1")
		if env.store == "containerd" {
			pins["containerd record label"] = importImage(t, "node/proxy-gc-record:1")
			ctr(t, "images", "label", "docker.io/node/proxy-gc-record:1", pinLabel+"=pinned")
		}
		unpinned := importImage(t, "node/proxy-gc-unpinned:1")

		// Under GC pressure from kubelet's start: until the proxy's sources have state its
		// ListImages is Unavailable (fail-safe), and kubelet's GC pass fails rather than delete.
		n := startNode(t, nodeOpts{
			proxyBackend: append([]string{b.binary}, b.flags...),
			shimFlags: []string{"--pinned-images", "node/proxy-gc-flag:1", "--pinned-images-file", pinsFile,
				"--preload-images-dir", preloadDir},
			kubeletConfig: "evictionHard:\n  imagefs.available: \"99%\"\nevictionPressureTransitionPeriod: 5s",
			kubeletArgs:   "--minimum-image-ttl-duration=0s",
		})
		direct, err := n.backend.listPinned(context.Background())
		assert.NilError(t, err)
		for why, id := range pins {
			assert.Check(t, !direct[id], "the backend itself pins the image of the %s (%s): the proxy would not be what keeps it", why, id)
		}

		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if _, err := dockerErr(nil, "image", "inspect", unpinned); err == nil {
				return poll.Continue("the unpinned unused image %s is still there", unpinned)
			}
			return poll.Success()
		}, poll.WithTimeout(120*time.Second), poll.WithDelay(time.Second))
		// Another GC pass, for a wrong removal to show: the eviction manager runs every 10 s here, but
		// acts only on fresh image filesystem stats, which upstream caches for 30 s.
		gcPasses := regexp.MustCompile(`"Attempting to delete unused images"`)
		removedBy := len(n.kubeletLogLines(gcPasses))
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if k := len(n.kubeletLogLines(gcPasses)); k <= removedBy {
				return poll.Continue("%d image GC passes, none since the removal", k)
			}
			return poll.Success()
		}, poll.WithTimeout(120*time.Second), poll.WithDelay(time.Second))
		for why, id := range pins {
			_, err := dockerErr(nil, "image", "inspect", id)
			assert.Check(t, err, "the image of the %s (%s) was removed through the proxy", why, id)
		}
		waitAllPinned(t, n.shim, pins)
		gc := n.kubeletLogLines(regexp.MustCompile(`image_gc_manager\.go|eviction_manager\.go`))
		t.Logf("kubelet's eviction and image GC log (%d lines):\n%s", len(gc), strings.Join(gc, "\n"))
		for _, l := range n.kubeletLogLines(regexp.MustCompile(`"Removing image`)) {
			assert.Check(t, strings.Contains(l, unpinned), "kubelet removed another image than the unpinned one: %s", l)
		}

		// kubelet runs a pod on the backend through the proxy (a static pod is admitted under pressure).
		n.apply(t, staticPod("proxy-gc", counterContainer("count")))
		p := n.waitRunning(t, "proxy-gc", "count")
		assert.Check(t, p.ip != "", "the pod has no IP through the proxy")
	})
}
