package pin

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/imageref"
)

// patternSeeds are patterns in every accepted form, and near misses.
func patternSeeds() []string {
	return []string{
		"busybox:1.36", "docker.io/library/busybox:1.36", "registry.k8s.io/pause:3.10",
		"busybox@" + digA, "busybox:1@" + digA, "quay.io/org/app@" + digB, digA,
		"sha384:" + strings.Repeat("a", 96), "busybox", "quay.io/org/app", "localhost:5000/app",
		"registry.k8s.io/*", "registry.k8s.io*", "busybox*", "rancher/*", "busybox:1.3*",
		"busybox@sha256:*", "index.docker.io/library/ng*", "*pause*", "*k8s.io/*",
		"  busybox:1  ", "*", "**", "*a", "a*b", "*a*b*", "sha256:xyz", "Busybox:1", "",
	}
}

// FuzzParsePattern checks that ParsePattern never panics, that a pattern keeps its
// trimmed text and re-parses to itself, that it matches the images its documented
// semantics say it matches, and that Match is total on any image.
func FuzzParsePattern(f *testing.F) {
	for _, s := range patternSeeds() {
		f.Add(s, "busybox:1.36")
	}
	f.Add("docker.io/busybox*", "busybox:1")
	f.Add("*library*", "<none>:<none>")
	f.Fuzz(func(t *testing.T, s, ref string) {
		p, err := ParsePattern(s)
		text := strings.TrimSpace(s)
		if err != nil {
			assert.ErrorContains(t, err, "invalid pinned image pattern "+strconv.Quote(text))
			assert.Assert(t, reflect.DeepEqual(p, Pattern{}))
			return
		}
		assert.Equal(t, p.String(), text)
		q, err := ParsePattern(p.String())
		assert.NilError(t, err)
		assert.Assert(t, reflect.DeepEqual(p, q), "%q re-parses to %#v, not %#v", text, q, p)

		// Total on arbitrary images.
		_ = p.Match(&Image{ID: ref, RepoTags: []string{ref}, RepoDigests: []string{ref}})
		_ = p.Match(&Image{})

		for _, img := range mustMatch(t, p) {
			assert.Assert(t, p.Match(&img), "pattern %q does not match %+v", text, img)
		}
	})
}

// mustMatch returns images that pattern p matches by its documented semantics.
func mustMatch(t *testing.T, p Pattern) []Image {
	text := p.String()
	switch p.kind {
	case kindTag:
		r := parseRef(t, text)
		imgs := []Image{
			{RepoTags: []string{text}}, {RepoTags: []string{r.String()}},
			{RepoTags: []string{"<none>:<none>", r.TagKey()}},
		}
		if familiarRoundTrips(r) {
			imgs = append(imgs, Image{RepoTags: []string{r.Familiar()}})
		}
		return imgs
	case kindDigest:
		r := parseRef(t, text)
		return []Image{
			{ID: r.Digest}, {RepoDigests: []string{text}}, {RepoDigests: []string{r.DigestKey()}},
			{RepoDigests: []string{r.Name + ":other@" + r.Digest}},
		}
	case kindBareDigest:
		return []Image{{ID: text}}
	case kindRepo:
		r := parseRef(t, text)
		return []Image{
			{RepoTags: []string{text}}, {RepoTags: []string{text + ":fuzz"}}, {RepoTags: []string{r.Name + ":latest"}},
			{RepoDigests: []string{r.Name + "@" + digA}},
		}
	case kindPrefix:
		// "busybox*" means "docker.io/library/busybox*", "registry.k8s.io/*" means
		// itself: a prefix written in familiar or normalised form matches the
		// reference it spells.
		prefix := strings.TrimSuffix(text, "*")
		if r, err := imageref.Parse(prefix); err == nil && (r.Familiar() == prefix || r.String() == prefix) {
			return []Image{{RepoTags: []string{prefix}}}
		}
	case kindKeyword:
		kw := strings.Trim(text, "*")
		if n, ok := imageref.Normalize(kw); ok && strings.Contains(n, kw) {
			return []Image{{RepoTags: []string{kw}}}
		}
	default:
		t.Fatalf("pattern %q parsed to kind %d", text, p.kind)
	}
	return nil
}

func parseRef(t *testing.T, s string) imageref.Ref {
	t.Helper()
	r, err := imageref.Parse(s)
	assert.NilError(t, err)
	return r
}

// familiarRoundTrips reports whether the familiar form of r parses back to r. It does
// not for Docker Hub repositories whose first component looks like a registry host:
// the familiar form of "docker.io/0.0/app" is "0.0/app", which names registry "0.0"
// (Docker Hub has no such namespaces).
func familiarRoundTrips(r imageref.Ref) bool {
	f, err := imageref.Parse(r.Familiar())
	return err == nil && f.String() == r.String()
}

// pinsErrLine is how a pins file error names the file and line.
var pinsErrLine = regexp.MustCompile(`^pins file "fuzz/pins" line ([0-9]+): invalid pinned image pattern `)

// FuzzParsePins checks that the pins file parser never panics, that every error names
// the file and a line that really holds a bad pattern, and that a file that parses
// yields one pattern per non-blank, non-comment line, each re-parsing to itself.
func FuzzParsePins(f *testing.F) {
	f.Add([]byte("# pinned images\nbusybox:1.36\n\nregistry.k8s.io/* # the whole registry\n*pause*\n"))
	f.Add([]byte("busybox:1.36\r\n\tquay.io/org/app@" + digA + "\r\n"))
	f.Add([]byte("a*b\nbusybox\n#x\nnot a ref\n"))
	f.Add([]byte("busybox#notacomment\nbusybox #comment"))
	f.Add([]byte(strings.Join(patternSeeds(), "\n")))
	f.Fuzz(func(t *testing.T, content []byte) {
		const path = "fuzz/pins"
		got, err := parsePins(path, bytes.NewReader(content))
		lines := strings.Split(string(content), "\n")
		for i, l := range lines {
			lines[i] = StripComment(strings.TrimSuffix(l, "\r"))
		}
		if err != nil {
			assert.Assert(t, got == nil)
			for _, e := range joined(err) {
				if strings.HasPrefix(e.Error(), `read pins file "fuzz/pins" after line `) {
					continue // a line longer than the scanner's buffer
				}
				m := pinsErrLine.FindStringSubmatch(e.Error())
				assert.Assert(t, m != nil, "error does not name the file and line: %v", e)
				n, _ := strconv.Atoi(m[1])
				assert.Assert(t, n >= 1 && n <= len(lines), "error names line %d of %d", n, len(lines))
				_, perr := ParsePattern(lines[n-1])
				assert.Assert(t, lines[n-1] != "" && perr != nil, "line %d %q is named but parses", n, lines[n-1])
			}
			return
		}
		var want []string
		for _, l := range lines {
			if l != "" {
				want = append(want, l)
			}
		}
		assert.Equal(t, len(got), len(want))
		for i, p := range got {
			assert.Equal(t, p.String(), want[i])
			q, err := ParsePattern(p.String())
			assert.NilError(t, err)
			assert.Assert(t, reflect.DeepEqual(p, q), "%q re-parses differently", p.String())
		}
	})
}

// joined returns the errors joined in err, or err itself.
func joined(err error) []error {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return j.Unwrap()
	}
	return []error{err}
}
