package imageref

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// ErrNone is returned for the engine's "<none>" placeholders, which name no image.
var ErrNone = errors.New(`"<none>" names no image`)

// Ref is a parsed image reference in its fully qualified form. The zero value is not
// a valid reference.
type Ref struct {
	named reference.Named
	// Name is the repository: "docker.io/library/busybox".
	Name string
	// Tag is "1.36"; "" when the reference has none.
	Tag string
	// Digest is "sha256:…"; "" when the reference has none.
	Digest string
}

// Parse parses an image reference as Docker reports or accepts it (the familiar
// form allowed: "busybox", "rancher/k3s:v1") and normalises it.
func Parse(s string) (Ref, error) {
	if strings.Contains(s, "<none>") {
		return Ref{}, ErrNone
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return Ref{}, fmt.Errorf("image reference %q: %w", s, err)
	}
	r := Ref{named: named, Name: named.Name()}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	return r, nil
}

// String is the whole normalised reference: "docker.io/library/busybox:1.36".
func (r Ref) String() string {
	if r.named == nil {
		return ""
	}
	return r.named.String()
}

// TagKey is "name:tag", or "" when the reference has no tag.
func (r Ref) TagKey() string {
	if r.Tag == "" {
		return ""
	}
	return r.Name + ":" + r.Tag
}

// DigestKey is "name@digest", or "" when the reference has no digest.
func (r Ref) DigestKey() string {
	if r.Digest == "" {
		return ""
	}
	return r.Name + "@" + r.Digest
}

// Domain is the registry host: "docker.io", "registry.k8s.io", "localhost:5000".
func (r Ref) Domain() string {
	if r.named == nil {
		return ""
	}
	return reference.Domain(r.named)
}

// Defaulted is the reference the engine resolves: with ":latest" when it has
// neither tag nor digest, else unchanged.
func (r Ref) Defaulted() Ref {
	if r.named == nil || r.Tag != "" || r.Digest != "" {
		return r
	}
	out := r
	out.named = reference.TagNameOnly(r.named)
	out.Tag = "latest"
	return out
}

// Familiar is the short form the engine shows: "busybox:1.36", "rancher/k3s:v1".
func (r Ref) Familiar() string {
	if r.named == nil {
		return ""
	}
	return reference.FamiliarString(r.named)
}

// Normalize returns the fully qualified form of s; ok is false when s does not parse.
func Normalize(s string) (normalized string, ok bool) {
	r, err := Parse(s)
	if err != nil {
		return "", false
	}
	return r.String(), true
}

// Resolved returns the reference the engine resolves s to (fully qualified,
// ":latest" when s has neither tag nor digest): the name of the engine's tag and of
// its containerd record. ok is false when s does not parse.
func Resolved(s string) (resolved string, ok bool) {
	r, err := Parse(s)
	if err != nil {
		return "", false
	}
	return r.Defaulted().String(), true
}

// Key is the form references are compared in: Resolved(s), or s itself when it does
// not parse (a bare image ID).
func Key(s string) string {
	if r, ok := Resolved(s); ok {
		return r
	}
	return s
}

// Check reports whether s names an image the engine can look up: a reference in any
// form Parse accepts, or an image ID (64 hex digits, with or without "sha256:").
func Check(s string) error {
	if _, err := reference.ParseAnyReference(s); err != nil {
		return fmt.Errorf("image reference %q: %w", s, err)
	}
	return nil
}
