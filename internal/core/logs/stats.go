package logs

import "sync/atomic"

// Stats is the log copying in numbers since the Manager was made, for metrics.
type Stats struct {
	// Copying is the number of containers whose log is being copied now.
	Copying int
	// Lines and Bytes count the CRI log lines (full or partial) written and their bytes.
	Lines, Bytes int64
	// Dropped counts the lines that could not be written (a full disk, say).
	Dropped int64
}

// counters are a Manager's totals, shared with its copiers.
type counters struct {
	lines, bytes, dropped atomic.Int64
}

// written counts one line of n bytes written, or dropped when err is not nil.
func (c *counters) written(n int, err error) {
	if err != nil {
		c.dropped.Add(1)
		return
	}
	c.lines.Add(1)
	c.bytes.Add(int64(n))
}

// Stats returns the totals and the number of logs being copied now.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	copying := 0
	for _, c := range m.copiers {
		select {
		case <-c.done:
		default:
			copying++
		}
	}
	m.mu.Unlock()
	return Stats{Copying: copying, Lines: m.counts.lines.Load(), Bytes: m.counts.bytes.Load(), Dropped: m.counts.dropped.Load()}
}
