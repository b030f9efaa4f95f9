package imageref

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in                         string
		name, tag, digest, full    string
		tagKey, digestKey, domain  string
		resolved, familiarResolved string
	}{
		{
			in: "busybox", name: "docker.io/library/busybox", full: "docker.io/library/busybox", domain: "docker.io",
			resolved: "docker.io/library/busybox:latest", familiarResolved: "busybox:latest",
		},
		{
			in: "index.docker.io/library/busybox:1.36", name: "docker.io/library/busybox", tag: "1.36",
			full: "docker.io/library/busybox:1.36", tagKey: "docker.io/library/busybox:1.36", domain: "docker.io",
			resolved: "docker.io/library/busybox:1.36", familiarResolved: "busybox:1.36",
		},
		{
			in: "rancher/k3s:v1", name: "docker.io/rancher/k3s", tag: "v1", full: "docker.io/rancher/k3s:v1",
			tagKey: "docker.io/rancher/k3s:v1", domain: "docker.io", resolved: "docker.io/rancher/k3s:v1", familiarResolved: "rancher/k3s:v1",
		},
		{
			in:   "localhost:5000/app:2@sha256:" + hex64,
			name: "localhost:5000/app", tag: "2", digest: "sha256:" + hex64,
			full: "localhost:5000/app:2@sha256:" + hex64, tagKey: "localhost:5000/app:2", digestKey: "localhost:5000/app@sha256:" + hex64,
			domain: "localhost:5000", resolved: "localhost:5000/app:2@sha256:" + hex64, familiarResolved: "localhost:5000/app:2@sha256:" + hex64,
		},
		{
			in: "registry.k8s.io/pause@sha256:" + hex64, name: "registry.k8s.io/pause", digest: "sha256:" + hex64,
			full: "registry.k8s.io/pause@sha256:" + hex64, digestKey: "registry.k8s.io/pause@sha256:" + hex64, domain: "registry.k8s.io",
			resolved: "registry.k8s.io/pause@sha256:" + hex64, familiarResolved: "registry.k8s.io/pause@sha256:" + hex64,
		},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := Parse(tc.in)
			assert.NilError(t, err)
			assert.Check(t, is.Equal(r.Name, tc.name))
			assert.Check(t, is.Equal(r.Tag, tc.tag))
			assert.Check(t, is.Equal(r.Digest, tc.digest))
			assert.Check(t, is.Equal(r.String(), tc.full))
			assert.Check(t, is.Equal(r.TagKey(), tc.tagKey))
			assert.Check(t, is.Equal(r.DigestKey(), tc.digestKey))
			assert.Check(t, is.Equal(r.Domain(), tc.domain))
			assert.Check(t, is.Equal(r.Defaulted().String(), tc.resolved))
			assert.Check(t, is.Equal(r.Defaulted().Familiar(), tc.familiarResolved))
			n, ok := Normalize(tc.in)
			assert.Check(t, ok)
			assert.Check(t, is.Equal(n, tc.full))
			res, ok := Resolved(tc.in)
			assert.Check(t, ok)
			assert.Check(t, is.Equal(res, tc.resolved))
		})
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", "<none>:<none>", "<none>@<none>", "Upper/Case", "busy*", hex64, "a b"} {
		_, err := Parse(in)
		assert.Check(t, err != nil, "%q parsed", in)
		_, ok := Normalize(in)
		assert.Check(t, !ok, "%q normalised", in)
		_, ok = Resolved(in)
		assert.Check(t, !ok, "%q resolved", in)
	}
	_, err := Parse("<none>:<none>")
	assert.Check(t, is.ErrorIs(err, ErrNone))
}

// TestResolved: the names the engine gives its tags and containerd records.
func TestResolved(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                    "docker.io/library/busybox:latest",
		"rancher/pause:3.6":          "docker.io/rancher/pause:3.6",
		"127.0.0.1:5000/x/y:1":       "127.0.0.1:5000/x/y:1",
		"busybox@sha256:" + hex64:    "docker.io/library/busybox@sha256:" + hex64,
		"registry.k8s.io/pause:3.10": "registry.k8s.io/pause:3.10",
	} {
		got, ok := Resolved(in)
		assert.Check(t, ok)
		assert.Check(t, is.Equal(got, want))
	}
	_, ok := Resolved("Bad Ref")
	assert.Check(t, !ok)
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"busybox", "sha256:" + hex64, hex64, "localhost:5000/a/b:1@sha256:" + hex64} {
		assert.Check(t, Check(ok), ok)
	}
	for _, bad := range []string{"", "Upper", "busy*", "a b", "sha256:"} {
		assert.Check(t, is.ErrorContains(Check(bad), "image reference"), bad)
	}
}

func TestZeroRef(t *testing.T) {
	var r Ref
	assert.Check(t, is.Equal(r.String(), ""))
	assert.Check(t, is.Equal(r.Familiar(), ""))
	assert.Check(t, is.Equal(r.Domain(), ""))
	assert.Check(t, is.Equal(r.Defaulted().String(), ""))
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		_, _ = Parse("registry.k8s.io/kube-apiserver:v1.35.0")
	}
}

func TestKey(t *testing.T) {
	assert.Equal(t, Key("busybox"), "docker.io/library/busybox:latest")
	assert.Equal(t, Key(strings.Repeat("a", 64)), strings.Repeat("a", 64)) // an image ID
	assert.Equal(t, Key("Not A Ref"), "Not A Ref")
}
