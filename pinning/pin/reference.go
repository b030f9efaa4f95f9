package pin

import (
	"sync"
	"sync/atomic"

	"github.com/dockpin/cri-dockerd/internal/imageref"
)

// MaxCachedRefs bounds the normalisation cache; it is emptied when it grows past this.
const MaxCachedRefs = 50000

// NormRef is a normalised, fully qualified image reference. Its strings are immutable
// once built and its memo is atomic, so cached values are shared freely between goroutines.
type NormRef struct {
	memo atomic.Pointer[refMemo] // which patterns of a MatchSet match this reference

	name   string // "docker.io/library/busybox"
	tagKey string // "docker.io/library/busybox:1.36"; "" without a tag
	digKey string // "docker.io/library/busybox@sha256:..."; "" without a digest
	digest string // "sha256:..."; "" without a digest
	full   string // the whole normalised reference
}

// NormalizeRef parses an image reference as Docker reports it (familiar form allowed).
// It returns nil for "<none>" placeholders and anything that does not parse.
func NormalizeRef(s string) *NormRef {
	r, err := imageref.Parse(s)
	if err != nil {
		return nil
	}
	return newNormRef(r)
}

func newNormRef(r imageref.Ref) *NormRef {
	return &NormRef{name: r.Name, full: r.String(), tagKey: r.TagKey(), digKey: r.DigestKey(), digest: r.Digest}
}

// RefCache memoises NormalizeRef per input string. It is safe for concurrent use.
type RefCache struct {
	max int
	mu  sync.RWMutex
	m   map[string]*NormRef // nil value: the input does not parse
}

// NewRefCache returns a normalisation cache of at most max references.
func NewRefCache(maxEntries int) *RefCache {
	return &RefCache{max: maxEntries, m: make(map[string]*NormRef)}
}

// Get returns s normalised (nil when it does not parse), from the cache when it can.
func (c *RefCache) Get(s string) *NormRef {
	c.mu.RLock()
	r, ok := c.m[s]
	c.mu.RUnlock()
	if ok {
		return r
	}
	r = NormalizeRef(s)
	c.mu.Lock()
	if len(c.m) >= c.max {
		c.m = make(map[string]*NormRef)
	}
	c.m[s] = r
	c.mu.Unlock()
	return r
}

// len is the number of cached references.
func (c *RefCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// AppendImageRefs appends the parsable, normalised RepoTags and RepoDigests of img to buf.
// A nil cache normalises without memoising.
func AppendImageRefs(c *RefCache, buf []*NormRef, img *Image) []*NormRef {
	buf = appendRefs(c, buf, img.RepoTags)
	return appendRefs(c, buf, img.RepoDigests)
}

// appendRefs appends the normalised forms of refs to buf.
func appendRefs(c *RefCache, buf []*NormRef, refs []string) []*NormRef {
	for _, s := range refs {
		var r *NormRef
		if c != nil {
			r = c.Get(s)
		} else {
			r = NormalizeRef(s)
		}
		if r != nil {
			buf = append(buf, r)
		}
	}
	return buf
}
