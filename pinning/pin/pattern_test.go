package pin

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func tags(t ...string) Image { return Image{ID: digC, RepoTags: t} }

func digests(d ...string) Image { return Image{ID: digC, RepoDigests: d} }

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		img     Image
		want    bool
	}{
		// repo:tag
		{"tag familiar", "busybox:1.36", tags("busybox:1.36"), true},
		{"tag qualified pattern vs familiar tag", "docker.io/library/busybox:1.36", tags("busybox:1.36"), true},
		{"tag familiar pattern vs qualified tag", "pause:3.10", tags("docker.io/library/pause:3.10"), true},
		{"tag org normalised", "docker.io/rancher/mirrored-pause:3.6", tags("rancher/mirrored-pause:3.6"), true},
		{"tag other registry", "registry.k8s.io/pause:3.10", tags("registry.k8s.io/pause:3.10"), true},
		{"tag registry differs", "registry.k8s.io/pause:3.10", tags("pause:3.10"), false},
		{"tag differs", "busybox:1.36", tags("busybox:1.37"), false},
		{"tag other org", "busybox:1.36", tags("myorg/busybox:1.36"), false},
		{"tag vs digest only", "busybox:1.36", digests("busybox@" + digA), false},
		{"tag among placeholders", "busybox:1", tags("<none>:<none>", "bad ref", "busybox:1"), true},
		// repo@digest
		{"digest vs repo digest", "busybox@" + digA, digests("busybox@" + digA), true},
		{"digest qualified", "docker.io/library/busybox@" + digA, digests("busybox@" + digA), true},
		{"digest vs image ID", "busybox@" + digA, Image{ID: digA}, true},
		{"digest other repo same digest", "busybox@" + digA, digests("alpine@" + digA), false},
		{"digest other digest", "busybox@" + digA, digests("busybox@" + digB), false},
		{"digest vs tag of repo", "busybox@" + digA, tags("busybox:1"), false},
		{"tag+digest uses digest", "busybox:1@" + digA, digests("busybox@" + digA), true},
		{"tag+digest ignores tag", "busybox:1@" + digA, tags("busybox:1"), false},
		// bare digest
		{"bare digest vs ID", digA, Image{ID: digA, RepoTags: []string{"x:1"}}, true},
		{"bare digest vs repo digest", digA, digests("quay.io/org/app@" + digA), true},
		{"bare digest no match", digA, Image{ID: digB, RepoDigests: []string{"busybox@" + digC}}, false},
		// bare repo
		{"repo any tag", "busybox", tags("busybox:1.36"), true},
		{"repo any digest", "busybox", digests("busybox@" + digA), true},
		{"repo qualified", "docker.io/library/busybox", tags("busybox:musl"), true},
		{"repo no latest added", "busybox", tags("busybox:1.36"), true},
		{"repo longer name", "busybox", tags("busyboxx:1"), false},
		{"repo other org", "busybox", tags("myorg/busybox:1"), false},
		{"repo other registry", "quay.io/org/app", tags("quay.io/org/app:v1"), true},
		{"repo sibling", "quay.io/org/app", tags("quay.io/org/app2:v1"), false},
		{"repo child", "quay.io/org/app", tags("quay.io/org/app/sub:v1"), false},
		{"repo placeholders only", "busybox", Image{RepoTags: []string{"<none>:<none>"}, RepoDigests: []string{"<none>@<none>"}}, false},
		// prefix*
		{"prefix registry", "registry.k8s.io/*", tags("registry.k8s.io/pause:3.10"), true},
		{"prefix registry vs hub", "registry.k8s.io/*", tags("pause:3.10"), false},
		{"prefix registry no slash", "registry.k8s.io*", tags("registry.k8s.io/pause:3.10"), true},
		{"prefix short name", "busybox*", tags("busybox:1"), true},
		{"prefix short name longer", "busybox*", tags("busyboxplus:1"), true},
		{"prefix short name as org", "busybox*", tags("busyboxorg/tool:1"), true},
		{"prefix short name other registry", "busybox*", tags("quay.io/busybox:1"), false},
		{"prefix short name digest", "busybox*", digests("busybox@" + digA), true},
		{"prefix org", "rancher/*", tags("rancher/mirrored-pause:3.6"), true},
		{"prefix org other registry", "rancher/*", tags("quay.io/rancher/x:1"), false},
		{"prefix org library not matched", "rancher/*", tags("rancher:1"), false},
		{"prefix org repo", "myorg/app*", tags("myorg/app-server:1"), true},
		{"prefix org repo other", "myorg/app*", tags("myorg/other:1"), false},
		{"prefix qualified hub", "docker.io/library/*", tags("nginx:1"), true},
		{"prefix index.docker.io", "index.docker.io/library/ng*", tags("nginx:1"), true},
		{"prefix localhost", "localhost:5000/*", tags("localhost:5000/app:1"), true},
		{"prefix tag", "busybox:1.3*", tags("busybox:1.36"), true},
		{"prefix tag other", "busybox:1.3*", tags("busybox:1.29"), false},
		{"prefix digest", "busybox@sha256:*", digests("busybox@" + digA), true},
		// *keyword*
		{"keyword", "*pause*", tags("registry.k8s.io/pause:3.10"), true},
		{"keyword in org repo", "*pause*", tags("rancher/mirrored-pause:3.6"), true},
		{"keyword no match", "*pause*", tags("busybox:1"), false},
		{"keyword normalised part", "*library/busy*", tags("busybox:1"), true},
		{"keyword in digest", "*sha256:aaaa*", digests("busybox@" + digA), true},
		{"keyword not in ID", "*aaaa*", Image{ID: digA}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePattern(tc.pattern)
			assert.NilError(t, err)
			assert.Equal(t, p.Match(&tc.img), tc.want)
		})
	}
}

func TestParsePatternErrors(t *testing.T) {
	tests := []struct {
		pattern string
		want    string // in the error after the pattern name
	}{
		{"", "empty pattern"},
		{"   ", "empty pattern"},
		{"*", "every image"},
		{"**", `"*" is allowed only`},
		{"***", `"*" is allowed only`},
		{"*a*b*", `"*" is allowed only`},
		{"a*b", `"*" is allowed only`},
		{"*foo", `"*" is allowed only`},
		{"bu*sy*", `"*" is allowed only`},
		{"FOO:", ""},
		{"busybox:", ""},
		{"Busybox", "lowercase"},
		{"sha256:abc", ""},
		{"sha256:" + strings.Repeat("a", 63), ""},
		{"sha256:" + strings.Repeat("A", 64), ""},
		{"busybox@sha256:zz", ""},
		{strings.Repeat("a", 64), ""},
		{"busy box*", "characters"},
		{"*foo bar*", "characters"},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			_, err := ParsePattern(tc.pattern)
			assert.ErrorContains(t, err, `invalid pinned image pattern "`+strings.TrimSpace(tc.pattern)+`": `)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParsePatternTrims(t *testing.T) {
	p, err := ParsePattern("  busybox:1 \t")
	assert.NilError(t, err)
	assert.Equal(t, p.String(), "busybox:1")
	assert.Assert(t, p.Match(&Image{RepoTags: []string{"busybox:1"}}))
}

func TestParsePatternsNamesEveryBadOne(t *testing.T) {
	_, err := ParsePatterns([]string{"busybox", "a*b", "ok:1", "FOO:"})
	assert.Assert(t, is.ErrorContains(err, `"a*b"`))
	assert.Assert(t, is.ErrorContains(err, `"FOO:"`))
}

func TestPrefixCandidates(t *testing.T) {
	tests := []struct {
		prefix string
		want   []string
	}{
		{"registry.k8s.io/", []string{"registry.k8s.io/"}},
		{"localhost/app", []string{"localhost/app"}},
		{"rancher/", []string{"docker.io/rancher/"}},
		{"myorg/app", []string{"docker.io/myorg/app"}},
		{"busybox", []string{"docker.io/library/busybox", "docker.io/busybox"}},
		{"registry.k8s.io", []string{"docker.io/library/registry.k8s.io", "docker.io/registry.k8s.io", "registry.k8s.io"}},
		{"index.docker.io/library/x", []string{"docker.io/library/x"}},
		{"MyHost/app", []string{"MyHost/app"}},
	}
	for _, tc := range tests {
		assert.DeepEqual(t, prefixCandidates(tc.prefix), tc.want)
	}
}

// Digests used across tests.
var (
	digA = "sha256:" + strings.Repeat("a", 64)
	digB = "sha256:" + strings.Repeat("b", 64)
	digC = "sha256:" + strings.Repeat("c", 64)
)
