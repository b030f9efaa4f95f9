package imageref

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// FuzzParse checks that Parse never panics and that its normal forms are fixed points:
// Normalize is idempotent, the normalised and familiar forms parse to the same
// reference, and Resolved names a tag or digest and re-resolves to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"busybox", "busybox:1.36", "library/busybox:latest", "docker.io/library/busybox",
		"index.docker.io/library/busybox:1.36", "rancher/k3s:v1", "registry.k8s.io/pause:3.10",
		"localhost:5000/app:2@sha256:" + hex64, "registry.k8s.io/pause@sha256:" + hex64,
		"quay.io/org/app/sub:v1", "<none>:<none>", "<none>@<none>", "sha256:" + hex64, hex64,
		"Busybox", "busybox:", "busybox@sha256:abc", "[::1]:5000/app:1", "a/b/c/d:e_f.g-h",
		" busybox ", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		norm, nok := Normalize(s)
		res, rok := Resolved(s)
		if err != nil {
			assert.Assert(t, !nok && norm == "", "Normalize(%q) = %q after Parse failed", s, norm)
			assert.Assert(t, !rok && res == "", "Resolved(%q) = %q after Parse failed", s, res)
			return
		}
		assert.Assert(t, nok && rok)
		assert.Equal(t, norm, r.String())
		assert.Assert(t, strings.HasPrefix(norm, r.Name), "%q does not start with its name %q", norm, r.Name)

		again, ok := Normalize(norm)
		assert.Assert(t, ok, "normalised %q does not parse", norm)
		assert.Equal(t, again, norm, "Normalize is not idempotent on %q", s)
		n, err := Parse(norm)
		assert.NilError(t, err)
		assert.Equal(t, n.Name, r.Name)
		assert.Equal(t, n.Tag, r.Tag)
		assert.Equal(t, n.Digest, r.Digest)
		assert.Equal(t, n.Domain(), r.Domain())

		// The familiar form names the same reference, except where distribution's
		// familiar form is ambiguous: a Docker Hub repository whose first component
		// looks like a registry host ("docker.io/0.0/app" is shown as "0.0/app").
		if fam, err := Parse(r.Familiar()); err != nil || fam.String() != norm {
			first, _, _ := strings.Cut(r.Familiar(), "/")
			assert.Assert(t, r.Domain() == "docker.io" && (strings.ContainsAny(first, ".:") || first == "localhost"),
				"familiar form %q of %q names another reference", r.Familiar(), s)
		}

		assert.Equal(t, r.TagKey() != "", r.Tag != "")
		assert.Equal(t, r.DigestKey() != "", r.Digest != "")

		rr, err := Parse(res)
		assert.NilError(t, err, "resolved %q of %q", res, s)
		assert.Equal(t, rr.String(), res)
		assert.Assert(t, rr.Tag != "" || rr.Digest != "", "resolved %q has neither tag nor digest", res)
		again, ok = Resolved(res)
		assert.Assert(t, ok)
		assert.Equal(t, again, res, "Resolved is not idempotent on %q", s)
		if r.Tag != "" || r.Digest != "" {
			assert.Equal(t, res, norm)
		} else {
			assert.Equal(t, res, norm+":latest")
		}
	})
}
