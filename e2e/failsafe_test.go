//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pins never fail open: a pin source that cannot answer never makes a pinned image
// look unpinned. These tests cut the source at the worst moments: before it ever
// answered, across a restart of our binary, and across a bad pins file or a damaged
// preload archive at the next start.

// pinSourceState returns crictl info's state of the named pin source.
func pinSourceState(t *testing.T, s *shim, name string) map[string]any {
	t.Helper()
	var info struct {
		Pinning struct {
			Sources []map[string]any `json:"sources"`
		} `json:"pinning"`
	}
	raw := s.crictl(t, "info")
	assert.NilError(t, json.Unmarshal([]byte(raw), &info), raw)
	for _, src := range info.Pinning.Sources {
		if src["name"] == name {
			return src
		}
	}
	t.Fatalf("no pin source %s in crictl info: %s", name, raw)
	return nil
}

// TestContainerdNeverAnsweredRefusesList: our binary starts while containerd cannot be
// reached and has never answered on this node: ListImages is refused (Unavailable,
// naming the source) rather than answered with its pinned image unpinned; other RPCs
// work; when containerd comes back, the list answers with the pin, no restart.
func TestContainerdNeverAnsweredRefusesList(t *testing.T) {
	requireContainerdStore(t)
	a := importImage(t, "e2e/failsafe-never:1")
	ctr(t, "images", "label", "docker.io/e2e/failsafe-never:1", pinLabel+"=pinned")
	proxy := &sockProxy{path: filepath.Join(t.TempDir(), "ctrd.sock"), target: containerdSocket()}
	s := startShim(t, "--containerd-address", proxy.path, "--containerd-timeout", "500ms")

	for range 3 {
		_, err := s.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
		assert.Equal(t, status.Code(err), codes.Unavailable, "got %v", err)
		assert.Check(t, strings.Contains(status.Convert(err).Message(), "pin source containerd-label has never answered"), err)
	}
	st, err := s.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "e2e/failsafe-never:1"}})
	assert.NilError(t, err, "ImageStatus serves pulls and container starts: it must go on")
	assert.Equal(t, st.Image.Id, a)
	_, err = s.rt.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	src := pinSourceState(t, s, "containerd-label")
	assert.Equal(t, src["state"], "never read")

	proxy.start(t)
	defer proxy.stop()
	start := time.Now()
	waitAllPinned(t, s, map[string]string{"containerd label": a}) // no restart of ours
	t.Logf("containerd reachable: ListImages answered with the pin after %s", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, pinSourceState(t, s, "containerd-label")["state"], "healthy")
}

// TestContainerdSavedPinsAcrossRestart: containerd answered once, then becomes
// unreachable and our binary is killed and restarted: the pins saved under the root
// directory answer from the first call; when containerd is back it is healthy again.
func TestContainerdSavedPinsAcrossRestart(t *testing.T) {
	requireContainerdStore(t)
	a := importImage(t, "e2e/failsafe-restart:1")
	ctr(t, "images", "label", "docker.io/e2e/failsafe-restart:1", pinLabel+"=pinned")
	proxy := &sockProxy{path: filepath.Join(t.TempDir(), "ctrd.sock"), target: containerdSocket()}
	proxy.start(t)
	defer proxy.stop()
	root := filepath.Join(t.TempDir(), "root")
	flags := []string{"--containerd-address", proxy.path, "--containerd-timeout", "500ms", "--cri-dockerd-root-directory", root}
	s := startShim(t, flags...)
	waitListPinned(t, s, a, true)
	saved, err := os.ReadFile(filepath.Join(root, "pinning", "source-containerd-label.json"))
	assert.NilError(t, err)
	assert.Check(t, strings.Contains(string(saved), a), "%s", saved)

	proxy.stop()
	s.kill(t)
	s = startShim(t, flags...)
	for i := range 5 {
		got, err := s.listPinned(context.Background())
		assert.NilError(t, err, "call %d: the saved pins answer", i)
		assert.Check(t, got[a], "call %d: pinned from the saved state", i)
	}
	src := pinSourceState(t, s, "containerd-label")
	assert.Equal(t, src["state"], "stale")
	assert.Equal(t, src["restored"], true)
	assert.Check(t, strings.Contains(s.crictl(t, "images", "-o", "json"), `"pinned": true`))

	proxy.start(t)
	ctr(t, "images", "label", "docker.io/e2e/failsafe-restart:1", pinLabel+"=")
	waitListPinned(t, s, a, false) // containerd answers again: its truth wins
	assert.Equal(t, pinSourceState(t, s, "containerd-label")["state"], "healthy")
}

// TestPinsFileBadAtRestart: a typo in the pins file followed by a restart (a reboot)
// does not keep the runtime from starting, and the last good pins stay in force.
func TestPinsFileBadAtRestart(t *testing.T) {
	a := importImage(t, "e2e/failsafe-pinsfile:1")
	pins := filepath.Join(t.TempDir(), "pins")
	assert.NilError(t, os.WriteFile(pins, []byte("e2e/failsafe-pinsfile:1\n"), 0o644))
	root := filepath.Join(t.TempDir(), "root")
	s := startShim(t, "--pinned-images-file", pins, "--cri-dockerd-root-directory", root)
	waitListPinned(t, s, a, true)
	s.stop(t)

	assert.NilError(t, os.WriteFile(pins, []byte("e2e/failsafe-pinsfile:1\nNot A Pattern\n"), 0o644))
	s = startShim(t, "--pinned-images-file", pins, "--cri-dockerd-root-directory", root)
	assert.Check(t, s.crictlImages(t)[a].Pinned, "the last good pins file stays in force")
	assert.Check(t, strings.Contains(s.log(t), "PINS FILE NOT LOADED"))
	info := s.crictl(t, "info")
	assert.Check(t, strings.Contains(info, "line 2") && strings.Contains(info, `"restored": true`), info)

	// --check-pins-file names the line, without touching the daemon.
	out, err := execOutput(env.binary, "--check-pins-file", pins)
	assert.Check(t, err != nil && strings.Contains(out, "line 2"), "%v: %s", err, out)
}

// TestPreloadDamagedArchiveKeepsPins: an archive loaded at one start is truncated
// before the next (a bad copy, a full disk): its image stays pinned.
func TestPreloadDamagedArchiveKeepsPins(t *testing.T) {
	dir := t.TempDir()
	a := importImage(t, "e2e/failsafe-preload:1")
	archive := filepath.Join(dir, "a.tar")
	docker(t, "save", "-o", archive, "e2e/failsafe-preload:1")
	root := filepath.Join(t.TempDir(), "root")
	s := startShim(t, "--preload-images-dir", dir, "--cri-dockerd-root-directory", root)
	waitListPinned(t, s, a, true) // loaded in the background
	s.stop(t)

	raw, err := os.ReadFile(archive)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(archive, raw[:len(raw)/3], 0o644))
	s = startShim(t, "--preload-images-dir", dir, "--cri-dockerd-root-directory", root)
	assert.Check(t, s.crictlImages(t)[a].Pinned, "a damaged archive keeps the pins of its last good load, from the start")
	waitLog(t, s, "tarball not loaded")
	assert.Check(t, s.crictlImages(t)[a].Pinned, "and after its load failed")
	assert.Check(t, strings.Contains(s.crictl(t, "info"), `"origin": "saved"`))

	assert.NilError(t, os.Remove(archive))
	s.stop(t)
	s = startShim(t, "--preload-images-dir", dir, "--cri-dockerd-root-directory", root)
	assert.Check(t, !s.crictlImages(t)[a].Pinned, "a removed archive drops its pins")
}
