package imagecache

import (
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestStats: the numbers behind the metrics agree with crictl info's view of the cache.
func TestStats(t *testing.T) {
	_, c := startFilled(t, fastConfig(), img(1, "a:1"), img(2, "b:1", "b:2"))
	st := c.Stats()
	info := c.CacheInfo()
	assert.Check(t, is.Equal(st.State, StateLive))
	assert.Check(t, is.Equal(st.State, info["state"]))
	assert.Check(t, is.Equal(st.Images, 2))
	assert.Check(t, is.Equal(st.Images, info["images"]))
	assert.Check(t, st.Resyncs >= 1, "the first fill is a resync: %+v", st)
	assert.Check(t, is.Equal(st.Resyncs, info["resyncs"]))
	assert.Check(t, !st.LastResync.IsZero())
}
