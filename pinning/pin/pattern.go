package pin

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/dockpin/cri-dockerd/internal/imageref"
)

type patternKind int

const (
	kindTag        patternKind = iota + 1 // repo:tag
	kindDigest                            // repo@digest (and repo:tag@digest)
	kindBareDigest                        // sha256:<hex>
	kindRepo                              // repo, every tag and digest
	kindPrefix                            // prefix*
	kindKeyword                           // *keyword*
)

// wildcardChars is what the fixed part of a prefix or keyword pattern may contain:
// the characters of an image reference.
var wildcardChars = regexp.MustCompile(`^[A-Za-z0-9._:/@-]+$`)

// digestAlgorithms are the prefixes that make a pattern a bare digest.
var digestAlgorithms = []string{"sha256:", "sha384:", "sha512:"}

// Pattern is one parsed pinned-image pattern. The zero value matches nothing.
type Pattern struct {
	text     string
	kind     patternKind
	key      string   // kindTag: name:tag; kindDigest: name@digest; kindRepo: name
	digest   string   // kindDigest, kindBareDigest
	prefixes []string // kindPrefix: normalised candidates
	keyword  string   // kindKeyword
}

// ParsePattern parses one pattern in any of the accepted forms: "repo:tag",
// "repo@sha256:<hex>", "sha256:<hex>", "repo", "prefix*" and "*keyword*".
// Surrounding spaces are ignored.
func ParsePattern(s string) (Pattern, error) {
	text := strings.TrimSpace(s)
	p, err := parsePattern(text)
	if err != nil {
		return Pattern{}, fmt.Errorf("invalid pinned image pattern %q: %w", text, err)
	}
	p.text = text
	return p, nil
}

// String returns the pattern as written (trimmed).
func (p Pattern) String() string { return p.text }

// WithText returns p shown as text (a preloaded image's pattern names its file).
func (p Pattern) WithText(text string) Pattern {
	p.text = text
	return p
}

// Match reports whether the pattern matches img. It normalises the image's
// references on every call; the Pinner uses a cache instead.
func (p Pattern) Match(img *Image) bool {
	return p.matches(img.ID, AppendImageRefs(nil, nil, img))
}

func parsePattern(text string) (Pattern, error) {
	n := strings.Count(text, "*")
	switch {
	case text == "":
		return Pattern{}, errors.New("empty pattern")
	case n == 0:
		return parseRefPattern(text)
	case n == 2 && len(text) > 2 && text[0] == '*' && text[len(text)-1] == '*':
		return parseKeyword(text[1 : len(text)-1])
	case n == 1 && text[len(text)-1] == '*':
		return parsePrefix(text[:len(text)-1])
	default:
		return Pattern{}, errors.New(`"*" is allowed only at the end ("prefix*") or at both ends ("*keyword*")`)
	}
}

func parseKeyword(kw string) (Pattern, error) {
	if !wildcardChars.MatchString(kw) {
		return Pattern{}, fmt.Errorf("keyword %q has characters that cannot occur in an image reference", kw)
	}
	return Pattern{kind: kindKeyword, keyword: kw}, nil
}

func parsePrefix(prefix string) (Pattern, error) {
	if prefix == "" {
		return Pattern{}, errors.New(`a lone "*" would pin every image`)
	}
	if !wildcardChars.MatchString(prefix) {
		return Pattern{}, fmt.Errorf("prefix %q has characters that cannot occur in an image reference", prefix)
	}
	return Pattern{kind: kindPrefix, prefixes: prefixCandidates(prefix)}, nil
}

// prefixCandidates turns a prefix as a user writes it into prefixes of normalised
// references: "registry.k8s.io/" stays, "rancher/" becomes "docker.io/rancher/",
// and "busybox" becomes both "docker.io/library/busybox" and "docker.io/busybox".
func prefixCandidates(prefix string) []string {
	first, rest, hasSlash := strings.Cut(prefix, "/")
	// As distribution decides it: a first component with "." or ":", "localhost", or
	// with upper case (never a Docker Hub namespace) is a registry host.
	isDomain := strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first
	switch {
	case hasSlash && first == "index.docker.io":
		return []string{"docker.io/" + rest}
	case hasSlash && isDomain:
		return []string{prefix}
	case hasSlash:
		return []string{"docker.io/" + prefix}
	}
	candidates := []string{"docker.io/library/" + prefix, "docker.io/" + prefix}
	if isDomain { // "registry.k8s.io*", "localhost:5000*"
		candidates = append(candidates, prefix)
	}
	return candidates
}

func parseRefPattern(text string) (Pattern, error) {
	if isBareDigest(text) {
		d, err := digest.Parse(text)
		if err != nil {
			return Pattern{}, err
		}
		return Pattern{kind: kindBareDigest, digest: d.String()}, nil
	}
	ref, err := imageref.Parse(text)
	if err != nil {
		return Pattern{}, err
	}
	r := newNormRef(ref)
	switch {
	case r.digest != "":
		return Pattern{kind: kindDigest, key: r.digKey, digest: r.digest}, nil
	case r.tagKey != "":
		return Pattern{kind: kindTag, key: r.tagKey}, nil
	default:
		return Pattern{kind: kindRepo, key: r.name}, nil
	}
}

func isBareDigest(text string) bool {
	for _, alg := range digestAlgorithms {
		if strings.HasPrefix(text, alg) {
			return true
		}
	}
	return false
}

// matches reports whether the pattern matches an image with the given ID and
// normalised references.
func (p *Pattern) matches(id string, refs []*NormRef) bool {
	return p.matchesID(id) || anyRef(refs, p.matchesRef)
}

// matchesID reports whether the pattern names the image ID (digest forms only).
func (p *Pattern) matchesID(id string) bool {
	return (p.kind == kindDigest || p.kind == kindBareDigest) && id == p.digest
}

// matchesRef reports whether the pattern matches one normalised reference.
func (p *Pattern) matchesRef(r *NormRef) bool {
	switch p.kind {
	case kindTag:
		return r.tagKey == p.key
	case kindDigest:
		return r.digKey == p.key
	case kindBareDigest:
		return r.digest == p.digest
	case kindRepo:
		return r.name == p.key
	case kindPrefix:
		return p.prefixMatches(r)
	case kindKeyword:
		return strings.Contains(r.full, p.keyword)
	}
	return false
}

func (p *Pattern) prefixMatches(r *NormRef) bool {
	for _, c := range p.prefixes {
		if strings.HasPrefix(r.full, c) {
			return true
		}
	}
	return false
}

func anyRef(refs []*NormRef, f func(*NormRef) bool) bool {
	for _, r := range refs {
		if f(r) {
			return true
		}
	}
	return false
}

// ParsePatterns parses a list of patterns, naming every bad one.
func ParsePatterns(texts []string) ([]Pattern, error) {
	return parseAll(texts, ParsePattern)
}

// parseAll parses each text with parse: the good ones, and an error naming every bad one.
func parseAll[T any](texts []string, parse func(string) (T, error)) ([]T, error) {
	out := make([]T, 0, len(texts))
	var errs []error
	for _, t := range texts {
		v, err := parse(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}

// ParseExact parses a reference that names one image: no wildcard, and a name
// without tag or digest means ":latest", as the engine would pull it.
func ParseExact(text string) (Pattern, error) {
	if strings.Contains(text, "*") {
		return Pattern{}, errors.New("wildcards are not allowed")
	}
	p, err := ParsePattern(text)
	if err != nil {
		return Pattern{}, errors.Unwrap(err)
	}
	if p.kind == kindRepo {
		p.kind = kindTag
		p.key += ":latest" // the engine's default tag
	}
	return p, nil
}
