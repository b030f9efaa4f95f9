package logs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// waitStats waits until the manager's totals satisfy ok.
func waitStats(t *testing.T, m *Manager, ok func(Stats) bool) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if st := m.Stats(); !ok(st) {
			return poll.Continue("stats %+v", st)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(time.Millisecond))
}

// TestStatsCountWrittenAndDropped: lines written count with their bytes, a line whose write
// fails counts as dropped, and a copier counts as copying until its log ends.
func TestStatsCountWrittenAndDropped(t *testing.T) {
	e, m, _ := copyingOne(t, logMsg{at(1), "stdout", "first\n"})
	want := int64(len(crLine(at(1), "stdout", "F", "first")))
	waitStats(t, m, func(st Stats) bool { return st == Stats{Copying: 1, Lines: 1, Bytes: want} })

	// Writes fail from now on: the file under the copier is one it cannot write.
	ro, err := os.Create(filepath.Join(t.TempDir(), "ro"))
	assert.NilError(t, err)
	assert.NilError(t, ro.Close())
	ro, err = os.Open(ro.Name())
	assert.NilError(t, err)
	m.mu.Lock()
	c := m.copiers["c1"]
	m.mu.Unlock()
	c.mu.Lock()
	good := c.f
	c.f = ro
	c.mu.Unlock()
	t.Cleanup(func() { _ = good.Close() })

	addLogs(t, e, "c1", logMsg{at(2), "stdout", "second\n"})
	waitStats(t, m, func(st Stats) bool { return st.Dropped == 1 })
	finish(e, "c1")
	waitDone(t, m, "c1")
	assert.Equal(t, m.Stats(), Stats{Copying: 0, Lines: 1, Bytes: want, Dropped: 1})
}
