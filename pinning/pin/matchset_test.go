package pin

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestMatchSetMemoFollowsSet(t *testing.T) {
	busybox, box := mustPattern(t, "busybox"), mustPattern(t, "*box*")
	one := NewMatchSet([]Pattern{busybox})
	two := NewMatchSet([]Pattern{busybox}, []Pattern{box})
	ref := NormalizeRef("busybox:1")
	assert.DeepEqual(t, one.refBits(ref), []uint64{0b01})
	assert.DeepEqual(t, two.refBits(ref), []uint64{0b11})
	assert.DeepEqual(t, one.refBits(ref), []uint64{0b01})
}

func TestMatchSetIDPatterns(t *testing.T) {
	s := NewMatchSet([]Pattern{mustPattern(t, "pause@"+digA)}, []Pattern{mustPattern(t, digB), mustPattern(t, "busybox")})
	assert.DeepEqual(t, s.idPatterns, []int{0, 1})
	bits := make([]uint64, s.Words())
	assert.Assert(t, s.Match(digB, nil, bits))
	assert.DeepEqual(t, bits, []uint64{0b010})
	assert.Assert(t, !s.Match(digC, nil, bits))
	assert.DeepEqual(t, bits, []uint64{0})
}

func mustPattern(t *testing.T, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	assert.NilError(t, err)
	return p
}
