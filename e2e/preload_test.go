//go:build e2e

package e2e

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// TestPreloadedImagesPinned: archives in --preload-images-dir are loaded at start-up
// and pinned; an archive removed since is not pinned at the next start; a broken one is
// logged and does not stop the binary.
func TestPreloadedImagesPinned(t *testing.T) {
	dir := t.TempDir()
	a := importImage(t, "e2e/preload-a:1")
	b := importImage(t, "e2e/preload-b:1")
	docker(t, "save", "-o", filepath.Join(dir, "a.tar"), "e2e/preload-a:1")
	plain := filepath.Join(t.TempDir(), "b.tar")
	docker(t, "save", "-o", plain, "e2e/preload-b:1")
	gzipFile(t, plain, filepath.Join(dir, "b.tar.gz"))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "broken.tar"), []byte("not an image archive"), 0o644))
	docker(t, "rmi", "e2e/preload-a:1", "e2e/preload-b:1")

	s := startShim(t, "--preload-images-dir", dir)
	// The archives load in the background, after the socket is served.
	waitListPinned(t, s, a, true)
	waitListPinned(t, s, b, true)
	inspect := s.crictl(t, "inspecti", "-o", "json", "e2e/preload-a:1")
	assert.Check(t, strings.Contains(inspect, `"source": "preload"`) && strings.Contains(inspect, "a.tar: e2e/preload-a:1"), inspect)
	waitLog(t, s, "tarball not loaded") // the broken archive is reported

	assert.NilError(t, os.Remove(filepath.Join(dir, "b.tar.gz")))
	s = startShim(t, "--preload-images-dir", dir)
	waitListPinned(t, s, a, true) // a.tar is still there: its image stays pinned
	got := s.crictlImages(t)
	_, present := got[b]
	assert.Check(t, present && !got[b].Pinned, "b.tar.gz was removed: its image stays but is no longer pinned (present=%v)", present)
}

// waitLog waits until the shim's log holds text.
func waitLog(t *testing.T, s *shim, text string) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if !strings.Contains(s.log(t), text) {
			return poll.Continue("no %q in the log yet", text)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

func gzipFile(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	assert.NilError(t, err)
	f, err := os.Create(to)
	assert.NilError(t, err)
	zw := gzip.NewWriter(f)
	_, err = zw.Write(raw)
	assert.NilError(t, err)
	assert.NilError(t, zw.Close())
	assert.NilError(t, f.Close())
}
