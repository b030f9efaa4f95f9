//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// TestNodeImageGC lets kubelet's image garbage collection loose on the engine: every image a pin
// source pins must stay, with the image a running container uses; an unpinned unused image goes.
// Eviction-mode GC for speed (../shared/docs/test-stack.md): imagefs.available below 99% is always
// "pressure", so the eviction manager runs the image GC's delete-unused pass at start and every
// 10-30 s, and --minimum-image-ttl-duration=0s (only the deprecated flag sets 0) makes every image
// old enough.
func TestNodeImageGC(t *testing.T) {
	requireNode(t)
	pauseImage(t)
	dir := t.TempDir()

	kept := map[string]string{"sandbox image": imageID(t, pauseRef)}
	kept["image-config label"] = importImage(t, "node/gc-config-label:1", pinLabel+"=pinned")
	kept["--pinned-images"] = importImage(t, "node/gc-flag:1")
	kept["pins file"] = importImage(t, "node/gc-file:1")
	pinsFile := filepath.Join(dir, "pins")
	assert.NilError(t, os.WriteFile(pinsFile, []byte("# node e2e\nnode/gc-file:1\n"), 0o644))
	kept["preload archive"] = importImage(t, "node/gc-preload:1")
	preloadDir := filepath.Join(dir, "preload")
	assert.NilError(t, os.MkdirAll(preloadDir, 0o755))
	docker(t, "save", "-o", filepath.Join(preloadDir, "gc.tar"), "node/gc-preload:1")
	if env.store == "containerd" {
		kept["containerd record label"] = importImage(t, "node/gc-ctrd:1")
		ctr(t, "images", "label", "docker.io/node/gc-ctrd:1", pinLabel+"=pinned")
	}
	// The image of a running container: the pause image's files under another config (a label), so another ID.
	build := exec.Command("docker", "-H", env.dockerHost, "build", "-q", "-t", "node/gc-used:1", "-")
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	build.Stdin = strings.NewReader("FROM " + pauseRef + "\nLABEL dockpin.test/node-gc=used\n")
	out, err := build.CombinedOutput()
	assert.NilError(t, err, "%s", out)
	kept["used by a running container"] = imageID(t, "node/gc-used:1")
	removeAtEnd(t, "node/gc-used:1")
	unpinned := importImage(t, "node/gc-unpinned:1")

	// kubelet without GC pressure first, until the pod using node/gc-used:1 runs (GC would remove
	// that image before the pod starts otherwise); then restarted with it (adopting the pod).
	n := startNode(t, nodeOpts{
		shimFlags: []string{"--pinned-images", "node/gc-flag:1", "--pinned-images-file", pinsFile,
			"--preload-images-dir", preloadDir},
	})
	waitAllPinned(t, n.shim, map[string]string{
		"sandbox image": kept["sandbox image"], "--pinned-images": kept["--pinned-images"], "pins file": kept["pins file"],
		"preload archive": kept["preload archive"], "image-config label": kept["image-config label"],
	})
	c := counterContainer("user")
	c["image"] = "node/gc-used:1"
	n.apply(t, staticPod("gc-user", c))
	n.waitRunning(t, "gc-user", "user")
	n.stopKubelet(t)
	n.opts.kubeletConfig = "evictionHard:\n  imagefs.available: \"99%\"\nevictionPressureTransitionPeriod: 5s"
	n.opts.kubeletArgs = "--minimum-image-ttl-duration=0s"
	n.startKubelet(t)

	start := time.Now()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, err := dockerErr(nil, "image", "inspect", unpinned); err == nil {
			return poll.Continue("the unpinned unused image %s is still there", unpinned)
		}
		return poll.Success()
	}, poll.WithTimeout(120*time.Second), poll.WithDelay(time.Second))
	t.Logf("kubelet removed the unpinned image %s after %s", unpinned, time.Since(start).Round(time.Second))
	// Another GC pass or two (the eviction manager runs every 10 s here) for any wrong removal to show.
	time.Sleep(25 * time.Second)
	n.waitRunning(t, "gc-user", "user")
	for why, id := range kept {
		_, err := dockerErr(nil, "image", "inspect", id)
		assert.Check(t, err, "image %s kept by %s was removed", id, why)
	}
	gc := n.kubeletLogLines(regexp.MustCompile(`image_gc_manager\.go`))
	t.Logf("kubelet's image GC log (%d lines):\n%s", len(gc), strings.Join(gc, "\n"))
	passes := n.kubeletLogLines(regexp.MustCompile(`"Attempting to delete unused images"`))
	assert.Check(t, len(passes) >= 2, "image GC passes: %d", len(passes))
	for _, l := range n.kubeletLogLines(regexp.MustCompile(`"Removing image`)) {
		assert.Check(t, strings.Contains(l, unpinned), "kubelet removed another image than the unpinned one: %s", l)
	}
}
