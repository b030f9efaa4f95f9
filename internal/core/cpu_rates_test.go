package core

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestCPURates(t *testing.T) {
	var r cpuRates
	t0 := time.Unix(1800000000, 0)
	assert.Equal(t, r.rate("a", 5e9, t0), uint64(0), "a first sample has no rate")
	assert.Equal(t, r.rate("a", 6e9, t0.Add(2*time.Second)), uint64(5e8), "1 s of CPU in 2 s: half a core")
	// A moment later: over the older kept sample (2.1 s), not over the last 100 ms.
	assert.Equal(t, r.rate("a", 6.21e9, t0.Add(2100*time.Millisecond)), uint64(576190476), "1.21 s over 2.1 s")
	// The count went back (the container restarted): no rate, a new start.
	assert.Equal(t, r.rate("a", 1e6, t0.Add(3*time.Second)), uint64(0))
	assert.Equal(t, r.rate("a", 1e6+4e9, t0.Add(5*time.Second)), uint64(2e9), "two cores")
	assert.Equal(t, r.rate("b", 1, t0.Add(5*time.Second)), uint64(0))
	// Samples nobody asks about are forgotten.
	r.rate("c", 1, t0.Add(5*time.Second+cpuRateForget+time.Minute))
	_, ok := r.samples["a"]
	assert.Check(t, !ok, "a forgotten")
	assert.Equal(t, len(r.samples), 1)
}
