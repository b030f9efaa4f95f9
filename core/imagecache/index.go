package imagecache

import (
	"slices"
	"strings"
	"sync"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/imageref"
)

// entry is one image as the engine shows it in its list (listed; nil for an image
// the list does not show) and, once asked for, as inspect shows it (the two differ:
// with the containerd store the engine reports different RepoDigests).
type entry struct {
	listed    *docker.Image
	inspected *docker.Image
	names     []string // normalised tags and digests of both views
	seq       uint64   // index sequence number of the last change
}

// index holds the images by ID. Changes carry a sequence number so that a full
// replace built from a list taken at seq s keeps what changed after s.
type index struct {
	mu      sync.RWMutex
	seq     uint64
	byID    map[string]*entry
	removed map[string]uint64 // IDs removed, and when, since the last replace
}

func newIndex() *index {
	return &index{byID: map[string]*entry{}, removed: map[string]uint64{}}
}

func (x *index) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// mark returns the current sequence number (taken before a full list).
func (x *index) mark() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.seq
}

func newEntry(listed, inspected *docker.Image, seq uint64) *entry {
	e := &entry{listed: listed, inspected: inspected, seq: seq}
	for _, img := range []*docker.Image{listed, inspected} {
		if img == nil {
			continue
		}
		for _, r := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
			if n := normalise(r); !slices.Contains(e.names, n) {
				e.names = append(e.names, n)
			}
		}
	}
	return e
}

// replace installs a full list taken when the sequence was start, keeping entries
// changed or removed after start (they are newer than the list).
func (x *index) replace(imgs []docker.Image, start uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	next := make(map[string]*entry, len(imgs))
	for i := range imgs {
		img := &imgs[i]
		if at, gone := x.removed[img.ID]; gone && at > start {
			continue
		}
		var inspected *docker.Image
		if old, ok := x.byID[img.ID]; ok && old.listed != nil && sameRefs(*old.listed, *img) {
			inspected = old.inspected // unchanged: keep the details already fetched
		}
		next[img.ID] = newEntry(img, inspected, x.seq)
	}
	for id, e := range x.byID {
		if e.seq > start {
			next[id] = e
		}
	}
	x.byID = next
	x.removed = map[string]uint64{}
}

func sameRefs(a, b docker.Image) bool {
	return a.Size == b.Size && slices.Equal(a.RepoTags, b.RepoTags) && slices.Equal(a.RepoDigests, b.RepoDigests)
}

// upsert stores both views of one image and returns the IDs of other entries that
// listed one of its tags or digests (they changed in the engine too).
func (x *index) upsert(listed *docker.Image, inspected docker.Image) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	e := newEntry(listed, &inspected, x.seq)
	var touched []string
	for id, other := range x.byID {
		if id != inspected.ID && slices.ContainsFunc(other.names, func(n string) bool { return slices.Contains(e.names, n) }) {
			touched = append(touched, id)
		}
	}
	x.byID[inspected.ID] = e
	delete(x.removed, inspected.ID)
	return touched
}

// remove drops the image with this ID.
func (x *index) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	delete(x.byID, id)
	x.removed[id] = x.seq
}

// list returns a copy of every listed image.
func (x *index) list() []docker.Image {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]docker.Image, 0, len(x.byID))
	for _, e := range x.byID {
		if e.listed != nil {
			out = append(out, *e.listed)
		}
	}
	return out
}

// found is what resolve knows of an image.
type found struct {
	id        string
	inspected *docker.Image
}

// resolve finds the image ref names as the engine would: a full ID, a reference
// (name alone means :latest), then a unique ID prefix.
func (x *index) resolve(ref string) (found, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, key := range []string{ref, "sha256:" + ref} {
		if e, ok := x.byID[key]; ok {
			return found{id: key, inspected: e.inspected}, true
		}
	}
	if want, ok := imageref.Resolved(ref); ok {
		for id, e := range x.byID {
			if slices.Contains(e.names, want) {
				return found{id: id, inspected: e.inspected}, true
			}
		}
	}
	return x.byIDPrefix(strings.TrimPrefix(ref, "sha256:"))
}

func (x *index) byIDPrefix(prefix string) (found, bool) {
	if prefix == "" || strings.Trim(prefix, "0123456789abcdef") != "" {
		return found{}, false
	}
	var hit found
	n := 0
	for id, e := range x.byID {
		if strings.HasPrefix(strings.TrimPrefix(id, "sha256:"), prefix) {
			hit, n = found{id: id, inspected: e.inspected}, n+1
		}
	}
	return hit, n == 1 // ambiguous or unknown: let the engine say
}

// normalise returns the fully qualified form of a reference, or r when it does not parse.
func normalise(r string) string {
	if n, ok := imageref.Normalize(r); ok {
		return n
	}
	return r
}
