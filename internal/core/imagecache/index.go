package imagecache

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/imageref"
)

// entry is one image as the engine shows it in its list (listed; nil for an image
// the list does not show) and, once asked for, as inspect shows it (the two differ:
// with the containerd store the engine reports different RepoDigests).
type entry struct {
	listed    *docker.Image
	inspected *docker.Image
	names     []string // normalised tags and digests of both views
	seq       uint64   // the sequence number the views are as of (see index)
	read      uint64   // when the read they came from started: seq, or before it for the event loop's
}

// write is where what is written to the index comes from. The event loop's writes
// apply but for a removal a later read saw (see index): each follows the event it
// refreshes for, in the engine's order. A read's (a full list, an inspect made for a
// request) started at sequence number start, and the engine may have answered it
// before a change whose event the index applied since; see index.
type write struct {
	event bool
	start uint64 // from begin: when the read behind the write started (the event loop's too)
}

// claim is the image a name was last written with, as of seq.
type claim struct {
	id  string
	seq uint64
}

// index holds the images by ID. Its sequence number orders what is written to it: a
// read takes one when it starts (begin), an event-loop write when it is applied. A
// read that started at s loses to what the index holds as of a later number, for the
// IDs (entries, removals) and the names (tags, digests) that write named, so that no
// answer the engine gave before an applied event undoes it.
//
// Removals are ordered by when their reads started, the event loop's too: the engine
// answered NotFound to a read that started after the event loop's inspect did, so that
// inspect's answer may be older than the removal and loses to it (applied after the
// removal, it is dropped; applied before, the removal still drops the entry it wrote).
// A RemoveImage that returned has seen its image gone; no answer from before may show
// it again. Should the image be back in the engine, its event follows (the event loop
// refreshes it again) and so does the resync that settles every burst of events.
// Removals and claims are kept only while a read that started before them is in
// flight (end).
type index struct {
	mu       sync.RWMutex
	seq      uint64
	byID     map[string]*entry
	removed  map[string]uint64 // IDs removed, and as of when
	claims   map[string]claim  // by normalised name: the image last written with it
	inFlight map[uint64]int    // starts of the reads in flight
	listedAt uint64            // start of the full list last installed
}

func newIndex() *index {
	return &index{byID: map[string]*entry{}, removed: map[string]uint64{}, claims: map[string]claim{}, inFlight: map[uint64]int{}}
}

func (x *index) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// begin returns a new sequence number for a read about to ask the engine; call end
// with it once its answer is written (or dropped).
func (x *index) begin() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	x.inFlight[x.seq]++
	return x.seq
}

// end forgets a read started at start, and the removals and claims no read in flight
// can lose to any more.
func (x *index) end(start uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.inFlight[start]--; x.inFlight[start] <= 0 {
		delete(x.inFlight, start)
	}
	floor := x.seq // nothing in flight: every later read starts after all of them
	for s := range x.inFlight {
		floor = min(floor, s)
	}
	maps.DeleteFunc(x.removed, func(_ string, at uint64) bool { return at <= floor })
	maps.DeleteFunc(x.claims, func(_ string, c claim) bool { return c.seq <= floor })
}

// stamp is the sequence number a write is as of. Caller holds mu.
func (x *index) stamp(w write) uint64 {
	if w.event {
		x.seq++
		return x.seq
	}
	return w.start
}

// newer tells whether the index holds what is newer than a read started at start
// about the image with this ID. Caller holds mu.
func (x *index) newer(id string, start uint64) bool {
	if e, ok := x.byID[id]; ok && e.seq > start {
		return true
	}
	return x.removedSince(id, start)
}

// removedSince tells whether a read that started after start saw the image with this
// ID gone: the answer of a read started at start may be older (see index). Caller
// holds mu.
func (x *index) removedSince(id string, start uint64) bool {
	return x.removed[id] > start
}

// strip returns img without the names written with another image after a read that
// started at start (img itself when there is none). Caller holds mu.
func (x *index) strip(img *docker.Image, start uint64) *docker.Image {
	if img == nil {
		return nil
	}
	moved := func(r string) bool {
		c, ok := x.claims[normalise(r)]
		return ok && c.seq > start && c.id != img.ID
	}
	if !slices.ContainsFunc(img.RepoTags, moved) && !slices.ContainsFunc(img.RepoDigests, moved) {
		return img
	}
	cp := *img
	cp.RepoTags = slices.DeleteFunc(slices.Clone(img.RepoTags), moved)
	cp.RepoDigests = slices.DeleteFunc(slices.Clone(img.RepoDigests), moved)
	return &cp
}

// put stores e under id and claims its names for the reads in flight. Caller holds mu.
func (x *index) put(id string, e *entry) {
	x.byID[id] = e
	delete(x.removed, id)
	if len(x.inFlight) == 0 {
		return // every later read starts after this
	}
	for _, n := range e.names {
		if c, ok := x.claims[n]; !ok || c.seq <= e.seq {
			x.claims[n] = claim{id: id, seq: e.seq}
		}
	}
}

func newEntry(listed, inspected *docker.Image, seq, read uint64) *entry {
	e := &entry{listed: listed, inspected: inspected, seq: seq, read: read}
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

// replace installs a full list taken by a read started at start, keeping what the
// index holds as of later (see index). It does nothing with a list older than the
// one last installed, and tells whether it installed this one.
func (x *index) replace(imgs []docker.Image, start uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if start < x.listedAt {
		return false
	}
	x.listedAt = start
	next := make(map[string]*entry, len(imgs))
	for i := range imgs {
		img := x.strip(&imgs[i], start)
		if x.newer(img.ID, start) {
			continue
		}
		var inspected *docker.Image
		if old, ok := x.byID[img.ID]; ok && old.listed != nil && sameRefs(*old.listed, *img) {
			inspected = x.strip(old.inspected, start) // unchanged: keep the details already fetched
		}
		next[img.ID] = newEntry(img, inspected, start, start)
	}
	for id, e := range x.byID {
		if e.seq > start {
			next[id] = e
		}
	}
	x.byID = next
	return true
}

func sameRefs(a, b docker.Image) bool {
	return a.Size == b.Size && slices.Equal(a.RepoTags, b.RepoTags) && slices.Equal(a.RepoDigests, b.RepoDigests)
}

// upsert stores both views of one image and returns the IDs of other entries that
// listed one of its tags or digests (they changed in the engine too); ok is false
// when the index holds newer (see index) and nothing was written.
func (x *index) upsert(listed *docker.Image, inspected docker.Image, w write) (touched []string, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !w.event {
		if x.newer(inspected.ID, w.start) {
			return nil, false
		}
		listed, inspected = x.strip(listed, w.start), *x.strip(&inspected, w.start)
	}
	e := newEntry(listed, &inspected, 0, w.start)
	shares := func(other *entry) bool {
		return slices.ContainsFunc(other.names, func(n string) bool { return slices.Contains(e.names, n) })
	}
	if w.event && x.removedSince(inspected.ID, w.start) {
		// An answer from before the image was seen gone: dropped. The images that
		// share its names are still refreshed, as the event may have moved one.
		for id, other := range x.byID {
			if id != inspected.ID && shares(other) {
				touched = append(touched, id)
			}
		}
		return touched, false
	}
	e.seq = x.stamp(w)
	var taken map[string]bool
	for id, other := range x.byID {
		if id != inspected.ID && shares(other) {
			touched = append(touched, id)
			if other.seq <= e.seq {
				// A tag or digest names one image: until the caller refreshes the other
				// one, it must not answer for the name too (a pull that moved a tag).
				if taken == nil {
					taken = e.exclusiveNames()
				}
				x.byID[id] = other.without(taken)
			}
		}
	}
	x.put(inspected.ID, e)
	return touched, true
}

// exclusiveNames are e's names that can name one image only: the references that
// parse (not an old engine's "<none>:<none>").
func (e *entry) exclusiveNames() map[string]bool {
	out := make(map[string]bool, len(e.names))
	for _, n := range e.names {
		if _, ok := imageref.Normalize(n); ok {
			out[n] = true
		}
	}
	return out
}

// without returns e, as of the same sequence number, without the names in taken.
func (e *entry) without(taken map[string]bool) *entry {
	drop := func(img *docker.Image) *docker.Image {
		if img == nil {
			return nil
		}
		cp := *img
		moved := func(r string) bool { return taken[normalise(r)] }
		cp.RepoTags = slices.DeleteFunc(slices.Clone(img.RepoTags), moved)
		cp.RepoDigests = slices.DeleteFunc(slices.Clone(img.RepoDigests), moved)
		return &cp
	}
	return newEntry(drop(e.listed), drop(e.inspected), e.seq, e.read)
}

// remove drops the image with this ID, unless the index holds what a later read saw
// (see index: an entry the event loop wrote from a read that started before this one
// is dropped).
func (x *index) remove(id string, w write) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !w.event {
		if e, ok := x.byID[id]; ok && e.read > w.start || x.removedSince(id, w.start) {
			return
		}
	}
	delete(x.byID, id)
	if at := x.stamp(w); len(x.inFlight) > 0 {
		x.removed[id] = at
	}
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
		// Of two entries with the name (a read's view of one not yet refreshed), the
		// one written last.
		var hit *entry
		var hitID string
		for id, e := range x.byID {
			if slices.Contains(e.names, want) && (hit == nil || e.seq > hit.seq) {
				hit, hitID = e, id
			}
		}
		if hit != nil {
			return found{id: hitID, inspected: hit.inspected}, true
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
