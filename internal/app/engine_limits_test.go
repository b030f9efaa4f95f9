package app

import (
	"strings"
	"testing"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"gotest.tools/v3/assert"
)

func TestEngineLimits(t *testing.T) {
	for _, tc := range []struct {
		api  string
		want []string // a word of each limit, in order
	}{
		{"1.42", []string{"shim", "read-only", "image volumes", "CDI", "subpaths"}},
		{"1.43", []string{"read-only", "image volumes", "CDI", "subpaths"}},
		{"1.47", []string{"image volumes", "CDI", "subpaths"}},
		{"1.50", []string{"subpaths"}},
		{"1.51", nil},
		{"1.56", nil},
	} {
		got := engineLimits(docker.Version{APIVersion: tc.api, NegotiatedAPIVersion: tc.api})
		assert.Equal(t, len(got), len(tc.want), "API %s: %q", tc.api, got)
		for i, w := range tc.want {
			assert.Check(t, strings.Contains(got[i], w), "API %s: %q lacks %q", tc.api, got[i], w)
			assert.Check(t, strings.HasPrefix(got[i], "engine API "+tc.api+" is older than"), got[i])
		}
	}
}
