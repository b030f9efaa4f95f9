package pin

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestWarnLimiter(t *testing.T) {
	now := time.Now()
	w := NewWarnLimiter(time.Minute, 2)
	assert.Assert(t, w.Allow("a", now))
	assert.Assert(t, !w.Allow("a", now.Add(30*time.Second)))
	assert.Assert(t, w.Allow("b", now.Add(40*time.Second)))
	// Full: "a" has expired by now and is pruned, "b" is kept.
	assert.Assert(t, w.Allow("c", now.Add(70*time.Second)))
	assert.Assert(t, !w.Allow("b", now.Add(80*time.Second)))
	assert.Assert(t, len(w.last) <= 2)
	// Full of live keys: everything is forgotten rather than growing.
	assert.Assert(t, w.Allow("d", now.Add(90*time.Second)))
	assert.Assert(t, len(w.last) <= 2)

	always := NewWarnLimiter(0, 2)
	assert.Assert(t, always.Allow("a", now))
	assert.Assert(t, always.Allow("a", now), "interval 0 warns every time")
}

func TestLabelSelectorErrors(t *testing.T) {
	for _, sel := range []string{"", " ", "=value", " = x"} {
		_, err := ParseLabelSelector(sel)
		assert.ErrorContains(t, err, "invalid pinned image label selector")
		assert.ErrorContains(t, err, "empty label key")
	}
}
