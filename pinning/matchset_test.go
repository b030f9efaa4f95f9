package pinning

import (
	"fmt"
	"testing"

	"gotest.tools/v3/assert"
)

func TestMatchSetManyPatterns(t *testing.T) {
	cfg := emptyConfig()
	for i := range 130 {
		cfg.Patterns = append(cfg.Patterns, fmt.Sprintf("app%d:1", i))
	}
	p, _, _ := newTestPinner(t, cfg)
	for _, i := range []int{0, 63, 64, 65, 127, 128, 129} {
		img := Image{ID: digA, RepoTags: []string{fmt.Sprintf("app%d:1", i)}}
		for range 2 { // computed, then remembered
			assert.DeepEqual(t, evaluateOne(t, p, img), []Reason{{SourcePattern, fmt.Sprintf("app%d:1", i)}})
		}
	}
}

func TestMatchSetMemoFollowsSet(t *testing.T) {
	r, err := compileRules(Config{Patterns: []string{"busybox"}})
	assert.NilError(t, err)
	one := newMatchSet(r, nil, nil)
	two := newMatchSet(r, &pinsFileState{patterns: []Pattern{mustPattern(t, "*box*")}}, nil)
	ref := normalizeRef("busybox:1")
	assert.DeepEqual(t, one.refBits(ref), []uint64{0b01})
	assert.DeepEqual(t, two.refBits(ref), []uint64{0b11})
	assert.DeepEqual(t, one.refBits(ref), []uint64{0b01})
}

func TestMatchSetIDPatterns(t *testing.T) {
	r, err := compileRules(Config{SandboxImage: "pause@" + digA, Patterns: []string{digB, "busybox"}})
	assert.NilError(t, err)
	s := newMatchSet(r, nil, nil)
	assert.DeepEqual(t, s.idPatterns, []int{0, 1})
	bits := make([]uint64, s.words)
	assert.Assert(t, s.match(digB, nil, bits))
	assert.DeepEqual(t, bits, []uint64{0b010})
	assert.Assert(t, !s.match(digC, nil, bits))
	assert.DeepEqual(t, bits, []uint64{0})
}

func mustPattern(t *testing.T, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	assert.NilError(t, err)
	return p
}
