//go:build e2e

package e2e

import (
	"context"
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
		if strings.Contains(s.log(t), "pins file not reloaded") {
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
