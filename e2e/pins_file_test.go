//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	crand "crypto/rand"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPinsFileReloadOnSIGHUP edits the pins file under a client that lists images in
// a loop: SIGHUP applies a good file without a restart and without a failed call,
// and a malformed file keeps the previous pins.
func TestPinsFileReloadOnSIGHUP(t *testing.T) {
	pins := filepath.Join(t.TempDir(), "pins")
	writePins := func(body string) { assert.NilError(t, os.WriteFile(pins, []byte(body), 0o644)) }
	writePins("# nothing pinned yet\n")
	s := startShim(t, "--pinned-images-file", pins)
	a := importImage(t, "e2e/sighup-a:1")
	b := importImage(t, "e2e/sighup-b:1")

	ctx, cancel := context.WithCancel(context.Background())
	var calls, failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := s.listPinned(context.Background()); err != nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
			calls.Add(1)
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	// reloadUnderLoad sends SIGHUP and waits until the client loop made calls after it.
	reloadUnderLoad := func() {
		t.Helper()
		before := calls.Load()
		s.signal(t, syscall.SIGHUP)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if calls.Load() < before+5 {
				return poll.Continue("client loop made %d calls since SIGHUP", calls.Load()-before)
			}
			return poll.Success()
		}, poll.WithTimeout(30*time.Second))
	}
	waitListPinned(t, s, a, false)

	writePins("docker.io/e2e/sighup-a:1   # pinned by file\n*sighup-b*\n")
	reloadUnderLoad()
	waitListPinned(t, s, a, true)
	waitListPinned(t, s, b, true)

	writePins("e2e/sighup-a:1\nnot a [valid pattern\n")
	reloadUnderLoad()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if strings.Contains(s.log(t), "pins files not reloaded") {
			return poll.Success()
		}
		return poll.Continue("reload of the bad file not logged yet")
	}, poll.WithTimeout(30*time.Second))
	got, err := s.listPinned(context.Background())
	assert.NilError(t, err)
	assert.Check(t, got[a] && got[b], "a malformed pins file must keep the previous pins: %v %v", got[a], got[b])
	assert.Check(t, strings.Contains(s.log(t), "line 2"), "the error should name the bad line")

	writePins("")
	reloadUnderLoad()
	waitListPinned(t, s, a, false)
	waitListPinned(t, s, b, false)

	cancel()
	wg.Wait()
	assert.Equal(t, failures.Load(), int64(0), "first failure: %v", firstErr.Load())
	t.Logf("ListImages calls during reloads: %d, failed: %d", calls.Load(), failures.Load())
}

// TestSIGHUPDuringStartup sends SIGHUP (systemd's ExecReload) every few milliseconds
// from the binary's first log line until it serves, through the load of a large
// preload archive: the process must survive (SIGHUP's default action would kill it),
// load and pin the archive's image, and apply the reloads once it serves.
func TestSIGHUPDuringStartup(t *testing.T) {
	dir := t.TempDir()
	const tag = "e2e/sighup-preload:1"
	id := bigPreloadArchive(t, dir, tag)
	pins := filepath.Join(t.TempDir(), "pins")
	assert.NilError(t, os.WriteFile(pins, []byte("e2e/sighup-none\n"), 0o644))

	s := launchBinary(t, env.binary, "", "--preload-images-dir", dir, "--pinned-images-file", pins)
	var sent, duringPreload int
	for {
		log := s.log(t)
		if strings.Contains(log, "starting cri-dockerd") {
			if _, err := s.rt.Version(context.Background(), &runtimeapi.VersionRequest{}); err == nil {
				break
			}
			assert.Assert(t, s.cmd.ProcessState == nil && s.cmd.Process.Signal(syscall.Signal(0)) == nil,
				"cri-dockerd died after %d SIGHUPs during its start-up", sent)
			s.signal(t, syscall.SIGHUP)
			sent++
			if !strings.Contains(log, "preload: loaded and pinned") {
				duringPreload++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%d SIGHUPs sent during start-up, %d of them before the preload was done", sent, duringPreload)
	assert.Assert(t, duringPreload > 0, "no SIGHUP reached the process while it loaded the archive")
	waitListPinned(t, s, id, true)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if !strings.Contains(s.log(t), "SIGHUP: pins reloaded") {
			return poll.Continue("the SIGHUPs received during start-up are not applied yet")
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(50*time.Millisecond))
}

// bigRootfsTar is a tar holding one file of size bytes of random data (so that the
// engine cannot compress it away), for an image that takes a while to load.
func bigRootfsTar(t testing.TB, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "blob", Mode: 0o644, Size: int64(size)}))
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	_, err := io.CopyN(tw, mrand.NewChaCha8(seed), int64(size))
	assert.NilError(t, err)
	assert.NilError(t, tw.Close())
	return buf.Bytes()
}

// bigPreloadArchive saves a 256 MiB image tagged tag as dir/big.tar and removes it from
// the engine (and its reloaded copy when the test ends); it returns the image's ID.
func bigPreloadArchive(t *testing.T, dir, tag string) string {
	t.Helper()
	_, err := dockerErr(bigRootfsTar(t, 256<<20), "import", "-", tag)
	assert.NilError(t, err)
	id := imageID(t, tag)
	removeAtEnd(t, id)
	docker(t, "save", "-o", filepath.Join(dir, "big.tar"), tag)
	docker(t, "rmi", tag)
	return id
}
