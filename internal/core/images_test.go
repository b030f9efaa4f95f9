package core

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

func filterOf(s string) (func(*pin.Image) bool, error) {
	return imageFilter(&runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: s}})
}

// FuzzImageFilter checks that a CRI image filter is either an InvalidArgument naming
// it or a predicate that is total on arbitrary images; that an image ID
// ("sha256:"+64 hex) is matched by its full ID, its hex and any "sha256:" prefix of it
// (and bare prefixes of at least minIDPrefix digits); and that an image tagged with a
// reference is matched by that reference and by its repository.
func FuzzImageFilter(f *testing.F) {
	hex64 := strings.Repeat("a", 64)
	for _, s := range []string{
		"", "  ", "busybox", "busybox:1.36", "docker.io/library/busybox:1.36", "registry.k8s.io/pause",
		"busybox@sha256:" + hex64, "sha256:" + hex64, hex64, "sha256:abc", "abcdef", "abcde", "ABCDEF",
		"sha256:", "sha256:" + hex64 + "a", "Not A Ref", "<none>:<none>", "sha256:busybox",
	} {
		f.Add(s, "busybox:1.36", []byte("id"), uint8(12))
	}
	f.Add("quay.io/org/app", "quay.io/org/app:v1", []byte{0}, uint8(0))
	f.Add("0123456", "localhost:5000/x@sha256:"+hex64, []byte("x"), uint8(63))
	f.Fuzz(func(t *testing.T, filter, ref string, idSeed []byte, n uint8) {
		sum := sha256.Sum256(idSeed)
		idHex := hex.EncodeToString(sum[:])
		id := "sha256:" + idHex

		match, err := filterOf(filter)
		if err != nil {
			assert.Assert(t, cerrdefs.IsInvalidArgument(err), "%v", err)
			assert.ErrorContains(t, err, strconv.Quote(strings.TrimSpace(filter)))
			assert.Assert(t, match == nil)
		} else {
			// Total on arbitrary images.
			_ = match(&pin.Image{})
			_ = match(&pin.Image{ID: ref, RepoTags: []string{ref, filter}, RepoDigests: []string{ref, filter, "@"}})
			_ = match(&pin.Image{ID: id, RepoTags: []string{"<none>:<none>"}, RepoDigests: []string{"<none>@<none>"}})
		}

		img := &pin.Image{ID: id, RepoTags: []string{"busybox:1.36"}}
		prefixLen := 1 + int(n)%64
		filters := []string{id, idHex, "sha256:" + idHex[:prefixLen]}
		if prefixLen >= minIDPrefix {
			filters = append(filters, idHex[:prefixLen])
		}
		for _, s := range filters {
			m, err := filterOf(s)
			assert.NilError(t, err, "filter %q", s)
			assert.Assert(t, m(img), "filter %q does not match image %s", s, id)
		}

		// An image tagged ref is matched by ref itself and by its repository, unless
		// ref starts with "sha256:", which a filter always takes for an image ID.
		r, err := imageref.Parse(ref)
		if err != nil || strings.HasPrefix(strings.TrimSpace(ref), "sha256:") {
			return
		}
		tagged := &pin.Image{ID: id, RepoTags: []string{ref}}
		for _, s := range []string{ref, r.String(), r.Name} {
			m, err := filterOf(s)
			assert.NilError(t, err, "filter %q", s)
			assert.Assert(t, m(tagged), "filter %q does not match an image tagged %q", s, ref)
		}
	})
}
