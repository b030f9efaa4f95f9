package pinning

import (
	"sync"
	"sync/atomic"

	"github.com/dockpin/cri-dockerd/internal/imageref"
)

// maxCachedRefs bounds the normalisation cache; it is emptied when it grows past this.
const maxCachedRefs = 50000

// normRef is a normalised, fully qualified image reference. Its strings are immutable
// once built and its memo is atomic, so cached values are shared freely between goroutines.
type normRef struct {
	memo atomic.Pointer[refMemo] // which patterns of a matchSet match this reference

	name   string // "docker.io/library/busybox"
	tagKey string // "docker.io/library/busybox:1.36"; "" without a tag
	digKey string // "docker.io/library/busybox@sha256:..."; "" without a digest
	digest string // "sha256:..."; "" without a digest
	full   string // the whole normalised reference
}

// normalizeRef parses an image reference as Docker reports it (familiar form allowed).
// It returns nil for "<none>" placeholders and anything that does not parse.
func normalizeRef(s string) *normRef {
	r, err := imageref.Parse(s)
	if err != nil {
		return nil
	}
	return newNormRef(r)
}

func newNormRef(r imageref.Ref) *normRef {
	return &normRef{name: r.Name, full: r.String(), tagKey: r.TagKey(), digKey: r.DigestKey(), digest: r.Digest}
}

// refCache memoises normalizeRef per input string. It is safe for concurrent use.
type refCache struct {
	max int
	mu  sync.RWMutex
	m   map[string]*normRef // nil value: the input does not parse
}

func newRefCache(maxEntries int) *refCache {
	return &refCache{max: maxEntries, m: make(map[string]*normRef)}
}

func (c *refCache) get(s string) *normRef {
	c.mu.RLock()
	r, ok := c.m[s]
	c.mu.RUnlock()
	if ok {
		return r
	}
	r = normalizeRef(s)
	c.mu.Lock()
	if len(c.m) >= c.max {
		c.m = make(map[string]*normRef)
	}
	c.m[s] = r
	c.mu.Unlock()
	return r
}

func (c *refCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// appendImageRefs appends the parsable, normalised RepoTags and RepoDigests of img to buf.
// A nil cache normalises without memoising.
func appendImageRefs(c *refCache, buf []*normRef, img *Image) []*normRef {
	buf = appendRefs(c, buf, img.RepoTags)
	return appendRefs(c, buf, img.RepoDigests)
}

func appendRefs(c *refCache, buf []*normRef, refs []string) []*normRef {
	for _, s := range refs {
		var r *normRef
		if c != nil {
			r = c.get(s)
		} else {
			r = normalizeRef(s)
		}
		if r != nil {
			buf = append(buf, r)
		}
	}
	return buf
}
