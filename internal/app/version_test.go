package app

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// semverRe is semver.org's grammar: core, optional pre-release, optional build metadata.
var semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// TestVersionLine: upstream's first line, `cri-dockerd <semver> (<commit>)`, which minikube and
// kubeadm-style tooling parse, with a version that sorts at or above upstream's newest release.
func TestVersionLine(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, Main([]string{"--version"}, &out, &errOut), 0)
	first, _, _ := strings.Cut(out.String(), "\n")
	m := regexp.MustCompile(`^cri-dockerd (\S+) \(([0-9a-f]{7}|unknown)\)$`).FindStringSubmatch(first)
	assert.Assert(t, m != nil, "version line %q", first)
	v := semverRe.FindStringSubmatch(m[1])
	assert.Assert(t, v != nil, "not semver: %q", m[1])
	// No pre-release: semver ranks 0.4.3-anything below 0.4.3.
	assert.Check(t, is.Equal(v[4], ""), "pre-release in %q", m[1])
	assert.Check(t, strings.HasPrefix(v[5], "dockpin."), "build metadata %q does not name this build", v[5])

	// The newest upstream releases (tags v0.4.1 … v0.4.3): ours is at or above each.
	for _, rel := range [][3]int{{0, 4, 1}, {0, 4, 3}} {
		assert.Check(t, !coreLess(v[1:4], rel), "%s sorts below upstream %v", m[1], rel)
	}
}

// coreLess reports whether the major.minor.patch strings c sort below r.
func coreLess(c []string, r [3]int) bool {
	for i := range 3 {
		n, _ := strconv.Atoi(c[i])
		if n != r[i] {
			return n < r[i]
		}
	}
	return false
}
