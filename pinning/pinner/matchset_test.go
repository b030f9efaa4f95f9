package pinner

import (
	"fmt"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
)

func TestMatchSetManyPatterns(t *testing.T) {
	cfg := emptyConfig()
	for i := range 130 {
		cfg.Patterns = append(cfg.Patterns, fmt.Sprintf("app%d:1", i))
	}
	p, _, _ := newTestPinner(t, cfg)
	for _, i := range []int{0, 63, 64, 65, 127, 128, 129} {
		img := pin.Image{ID: pintest.DigA, RepoTags: []string{fmt.Sprintf("app%d:1", i)}}
		for range 2 { // computed, then remembered
			assert.DeepEqual(t, pintest.EvaluateOne(t, p, img), []pin.Reason{{Source: pin.SourcePattern, Detail: fmt.Sprintf("app%d:1", i)}})
		}
	}
}
