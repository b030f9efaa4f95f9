package stats

import (
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestUsage: the CRI's CPU and memory usage read from the cgroup, on v2 and v1, the
// working set being usage less inactive_file.
func TestUsage(t *testing.T) {
	now := time.Unix(1700000100, 0)
	want := Usage{Timestamp: now, CPUUsageNanos: 12_500_000_000, MemoryUsageBytes: 52428800,
		MemoryWorkingSetBytes: 52428800 - 10485760, MemoryRSSBytes: 20971520, PageFaults: 5000, MajorPageFaults: 12}
	for name, c := range map[string]struct {
		root string
		pid  int
		pids uint64
	}{"v2": {v2Tree(t), 100, 3}, "v1": {v1Tree(t), 200, 0}} {
		t.Run(name, func(t *testing.T) {
			got, err := NewCollector(c.root).Usage(c.pid, "abc", now)
			assert.NilError(t, err)
			w := want
			w.Pids = c.pids
			assert.DeepEqual(t, got, w)
		})
	}
}

// TestUsageRefusesOtherProcesses: a pid that is gone, or that is not in a cgroup of
// the container (the kernel reused it), is NotFound: the caller asks the engine again.
func TestUsageRefusesOtherProcesses(t *testing.T) {
	c := NewCollector(v2Tree(t))
	_, err := c.Usage(100, "def", time.Now())
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
	_, err = c.Usage(999, "abc", time.Now())
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
	_, err = c.Usage(0, "abc", time.Now())
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
	_, err = NewCollector(t.TempDir()).Usage(100, "abc", time.Now())
	assert.Check(t, is.ErrorContains(err, "gone"))
}

func BenchmarkUsage(b *testing.B) {
	c := NewCollector(v2Tree(b))
	now := time.Now()
	for b.Loop() {
		if _, err := c.Usage(100, "abc", now); err != nil {
			b.Fatal(err)
		}
	}
}
