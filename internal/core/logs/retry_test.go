package logs

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

func TestManagerRetry(t *testing.T) {
	msgs := []logMsg{
		{at(1), "stdout", "one\n"},
		{at(2), "stderr", "two\n"},
		{at(3), "stdout", "0123456789abcdefghij!\n"},
		{at(4), "stdout", "four\n"},
	}
	want := crLine(at(1), "stdout", "F", "one") + crLine(at(2), "stderr", "F", "two") +
		crLine(at(3), "stdout", "P", "0123456789") + crLine(at(3), "stdout", "P", "abcdefghij") +
		crLine(at(3), "stdout", "F", "!") + crLine(at(4), "stdout", "F", "four")
	prefix := len(engineTime(at(3))) + 1
	tests := []struct {
		name      string
		failAfter int
		failMid   int
	}{
		{name: "between messages", failAfter: 2},
		{name: "inside a timestamp", failAfter: 2, failMid: 10},
		{name: "inside the first chunk", failAfter: 2, failMid: prefix + 5},
		{name: "after a partial chunk was written", failAfter: 2, failMid: prefix + 15},
		{name: "before the newline", failAfter: 2, failMid: prefix + 21},
		{name: "after the first message", failAfter: 1},
	}
	for _, tc := range tests {
		for _, ignoreSince := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ignore since %v", tc.name, ignoreSince), func(t *testing.T) {
				e := newEngine()
				e.SetLogSinceIgnored(ignoreSince)
				addLogs(t, e, "c1", msgs...)
				e.BreakLogs("c1", tc.failAfter, tc.failMid, errEngineDown)
				finish(e, "c1")
				m := newTestManager(t, e, Config{MaxLineSize: 10})
				path := startCopy(t, m, "c1")
				waitDone(t, m, "c1")
				assert.Equal(t, readFile(t, path), want)
				assert.Equal(t, len(sinces(e, "c1")), 2, "one retry")
			})
		}
	}
}

func TestManagerRetriesWhileEngineDown(t *testing.T) {
	e := newEngine()
	e.InjectError("ContainerLogs", errEngineDown)
	m := newTestManager(t, e, Config{RetryInitial: time.Millisecond, RetryMax: 4 * time.Millisecond})
	dir := t.TempDir()
	assert.NilError(t, startAt(m, context.Background(), "c1", filepath.Join(dir, "c1.log")))
	waitRequests(t, e, "c1", 5)
	// Reopen works while retrying.
	assert.NilError(t, m.Reopen("c1"))
	m.Stop("c1")
	n := len(e.LogsRequests("c1"))
	// A witness retrying on the same schedule: by its fifth request a copier of c1
	// still retrying (at its longest wait) would have asked again too.
	assert.NilError(t, startAt(m, context.Background(), "witness", filepath.Join(dir, "witness.log")))
	waitRequests(t, e, "witness", 5)
	assert.Equal(t, len(e.LogsRequests("c1")), n, "no retries after Stop")
}

func TestManagerContainerGone(t *testing.T) {
	e, m, _ := copyingOne(t, logMsg{at(1), "stdout", "a\n"})
	assert.NilError(t, e.RemoveContainer(context.Background(), "c1"))
	waitDone(t, m, "c1")
}

// A log the engine cannot read back (a log driver without reading support) ends the
// copy at once instead of retrying for the container's whole life.
func TestManagerUnreadableLogEnds(t *testing.T) {
	for _, kind := range []error{errdefs.ErrNotImplemented, errdefs.ErrFailedPrecondition} {
		t.Run(kind.Error(), func(t *testing.T) {
			e := newEngine()
			addLogs(t, e, "c1")
			e.InjectError("ContainerLogs", fmt.Errorf("configured logging driver does not support reading: %w", kind))
			m := newTestManager(t, e, Config{RetryInitial: time.Millisecond, RetryMax: time.Millisecond})
			assert.NilError(t, startAt(m, context.Background(), "c1", filepath.Join(t.TempDir(), "0.log")))
			assert.NilError(t, m.Wait(context.Background(), "c1"))
			assert.Equal(t, len(e.LogsRequests("c1")), 1)
		})
	}
}
