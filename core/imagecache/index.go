package imagecache

import (
	"slices"
	"strings"
	"sync"

	"github.com/distribution/reference"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// entry is one image with the normalised forms of its references.
type entry struct {
	img       docker.Image
	inspected bool     // img came from an inspect (has User)
	names     []string // normalised RepoTags and RepoDigests
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

func newEntry(img docker.Image, inspected bool, seq uint64) *entry {
	e := &entry{img: img, inspected: inspected, seq: seq}
	for _, r := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
		e.names = append(e.names, normalise(r))
	}
	return e
}

// replace installs a full list taken when the sequence was start, keeping entries
// changed or removed after start (they are newer than the list).
func (x *index) replace(imgs []docker.Image, start uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	next := make(map[string]*entry, len(imgs))
	for _, img := range imgs {
		if at, gone := x.removed[img.ID]; gone && at > start {
			continue
		}
		if old, ok := x.byID[img.ID]; ok && old.inspected && sameRefs(old.img, img) {
			next[img.ID] = old // keep the inspected details (User)
			continue
		}
		next[img.ID] = newEntry(img, false, x.seq)
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

// upsert stores an inspected image and takes its references away from other
// entries; it returns the IDs of those others (they changed in the engine too).
func (x *index) upsert(img docker.Image) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	e := newEntry(img, true, x.seq)
	var touched []string
	for id, other := range x.byID {
		if id == img.ID {
			continue
		}
		if slices.ContainsFunc(other.img.RepoTags, func(t string) bool { return slices.Contains(img.RepoTags, t) }) ||
			slices.ContainsFunc(other.img.RepoDigests, func(d string) bool { return slices.Contains(img.RepoDigests, d) }) {
			touched = append(touched, id)
		}
	}
	x.byID[img.ID] = e
	delete(x.removed, img.ID)
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

// list returns a copy of every image.
func (x *index) list() []docker.Image {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]docker.Image, 0, len(x.byID))
	for _, e := range x.byID {
		img := e.img
		img.User = ""
		out = append(out, img)
	}
	return out
}

// resolve finds the image ref names as the engine would: a full ID, a reference
// (name alone means :latest), then a unique ID prefix. It returns the entry's image
// and whether it was inspected.
func (x *index) resolve(ref string) (docker.Image, bool, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e, ok := x.byID[ref]; ok {
		return e.img, e.inspected, true
	}
	if e, ok := x.byID["sha256:"+ref]; ok {
		return e.img, e.inspected, true
	}
	if n, err := reference.ParseNormalizedNamed(ref); err == nil {
		want := reference.TagNameOnly(n).String()
		for _, e := range x.byID {
			if slices.Contains(e.names, want) {
				return e.img, e.inspected, true
			}
		}
	}
	return x.byIDPrefix(strings.TrimPrefix(ref, "sha256:"))
}

func (x *index) byIDPrefix(prefix string) (docker.Image, bool, bool) {
	if prefix == "" || strings.Trim(prefix, "0123456789abcdef") != "" {
		return docker.Image{}, false, false
	}
	var found *entry
	for id, e := range x.byID {
		if strings.HasPrefix(strings.TrimPrefix(id, "sha256:"), prefix) {
			if found != nil {
				return docker.Image{}, false, false // ambiguous: let the engine say so
			}
			found = e
		}
	}
	if found == nil {
		return docker.Image{}, false, false
	}
	return found.img, found.inspected, true
}

// normalise returns the fully qualified form of a reference, or r when it does not parse.
func normalise(r string) string {
	n, err := reference.ParseNormalizedNamed(r)
	if err != nil {
		return r
	}
	return n.String()
}
