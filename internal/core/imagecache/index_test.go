package imagecache

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// asEvent makes a write as the event loop does: from a read that starts now, as of
// when it is applied.
func asEvent(x *index, f func(w write)) {
	s := x.begin()
	defer x.end(s)
	f(write{event: true, start: s})
}

// What a read (list or request inspect) started before an event write brings loses to
// that write, for the IDs and names it named; a read started after it wins.
func TestIndexReadsLoseToNewerEventWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		run   func(x *index) // the event writes made while the read is in flight
		read  func(x *index, start uint64)
		want  []docker.Image
		after bool // the read starts after the event writes
	}{
		{
			name: "list after delete",
			run:  func(x *index) { asEvent(x, func(w write) { x.remove(id(1), w) }) },
			read: func(x *index, s uint64) { x.replace([]docker.Image{img(1, "a:1"), img(2, "b:1")}, s) },
			want: []docker.Image{img(2, "b:1")},
		},
		{
			name: "list after tag moved",
			run: func(x *index) {
				asEvent(x, func(w write) { x.upsert(ptr(img(2, "b:1", "a:1")), img(2, "b:1", "a:1"), w) })
			},
			read: func(x *index, s uint64) { x.replace([]docker.Image{img(1, "a:1"), img(2, "b:1")}, s) },
			want: []docker.Image{img(1), img(2, "b:1", "a:1")},
		},
		{
			name: "inspect after delete",
			run:  func(x *index) { asEvent(x, func(w write) { x.remove(id(1), w) }) },
			read: func(x *index, s uint64) { x.upsert(ptr(img(1, "a:1")), img(1, "a:1"), write{start: s}) },
			want: []docker.Image{img(2, "b:1")},
		},
		{
			name: "inspect after tag moved",
			run: func(x *index) {
				asEvent(x, func(w write) { x.upsert(ptr(img(2, "b:1", "c:1")), img(2, "b:1", "c:1"), w) })
			},
			read: func(x *index, s uint64) { x.upsert(ptr(img(3, "c:1")), img(3, "c:1"), write{start: s}) },
			want: []docker.Image{img(1, "a:1"), img(2, "b:1", "c:1"), img(3)},
		},
		{
			name: "delete after inspect",
			run:  func(x *index) { asEvent(x, func(w write) { x.upsert(ptr(img(1, "a:2")), img(1, "a:2"), w) }) },
			read: func(x *index, s uint64) { x.remove(id(1), write{start: s}) },
			want: []docker.Image{img(1, "a:2"), img(2, "b:1")},
		},
		{
			name:  "list started after the delete",
			run:   func(x *index) { asEvent(x, func(w write) { x.remove(id(1), w) }) },
			read:  func(x *index, s uint64) { x.replace([]docker.Image{img(1, "a:1"), img(2, "b:1")}, s) },
			want:  []docker.Image{img(1, "a:1"), img(2, "b:1")},
			after: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex()
			s0 := x.begin()
			x.replace([]docker.Image{img(1, "a:1"), img(2, "b:1")}, s0)
			x.end(s0)
			var start uint64
			if !tc.after {
				start = x.begin()
			}
			tc.run(x)
			if tc.after {
				start = x.begin()
			}
			tc.read(x, start)
			x.end(start)
			assert.DeepEqual(t, view(x.list()), view(tc.want))
			assert.Equal(t, len(x.removed)+len(x.claims)+len(x.inFlight), 0, "nothing in flight: nothing to remember")
		})
	}
}

func ptr(i docker.Image) *docker.Image { return &i }

// A removal a read saw wins over what the event loop's reads that started before it
// answered, whichever is applied first (a RemoveImage that returned must not see its
// image back); the event loop's reads that started after it win. A dropped event
// answer still names the images that share its names, for the caller to refresh.
func TestIndexRemovalsBeatOlderEventAnswers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		eventLater   bool // the event loop's read starts after the removal's
		removalFirst bool // the removal is applied first
		want         []docker.Image
	}{
		{name: "event answer applied after the removal", removalFirst: true, want: []docker.Image{img(2, "b:1")}},
		{name: "event answer applied before the removal", want: []docker.Image{img(2)}},
		{name: "event read started later, applied last", eventLater: true, removalFirst: true, want: []docker.Image{img(1, "a:1", "b:1"), img(2)}},
		{name: "event read started later, applied first", eventLater: true, want: []docker.Image{img(1, "a:1", "b:1"), img(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex()
			s0 := x.begin()
			x.replace([]docker.Image{img(1, "a:1"), img(2, "b:1")}, s0)
			x.end(s0)
			var es, rs uint64
			if tc.eventLater {
				rs, es = x.begin(), x.begin()
			} else {
				es, rs = x.begin(), x.begin()
			}
			event := func() {
				touched, _ := x.upsert(ptr(img(1, "a:1", "b:1")), img(1, "a:1", "b:1"), write{event: true, start: es})
				assert.DeepEqual(t, touched, []string{id(2)})
			}
			removal := func() { x.remove(id(1), write{start: rs}) }
			if tc.removalFirst {
				removal()
				event()
			} else {
				event()
				removal()
			}
			x.end(es)
			x.end(rs)
			assert.DeepEqual(t, view(x.list()), view(tc.want))
			assert.Equal(t, len(x.removed)+len(x.claims)+len(x.inFlight), 0, "nothing in flight: nothing to remember")
		})
	}
}

// Of two lists taken concurrently, the older one, installed last, is dropped: it may
// show images the newer one knows are gone.
func TestIndexDropsAnOlderList(t *testing.T) {
	x := newIndex()
	older, newer := x.begin(), x.begin()
	assert.Check(t, x.replace([]docker.Image{img(1, "a:1")}, newer))
	assert.Check(t, !x.replace([]docker.Image{img(1, "a:1"), img(2, "b:1")}, older))
	x.end(older)
	x.end(newer)
	assert.DeepEqual(t, view(x.list()), view([]docker.Image{img(1, "a:1")}))
}

// Event writes with no read in flight remember no removals or claims, and what reads
// in flight need is forgotten once the oldest of them ends.
func TestIndexRemembersOnlyForReadsInFlight(t *testing.T) {
	x := newIndex()
	event := write{event: true}
	x.upsert(ptr(img(1, "a:1")), img(1, "a:1"), event)
	x.remove(id(1), event)
	assert.Equal(t, len(x.removed)+len(x.claims), 0)

	first := x.begin()
	x.upsert(ptr(img(2, "b:1")), img(2, "b:1"), event)
	second := x.begin()
	x.remove(id(2), event)
	x.upsert(ptr(img(3, "c:1")), img(3, "c:1"), event)
	x.end(second)
	assert.Equal(t, len(x.removed), 1)
	assert.Equal(t, len(x.claims), 2)
	x.end(first)
	assert.Equal(t, len(x.removed)+len(x.claims)+len(x.inFlight), 0)
}

// A pull that moves a tag: the image written with it takes the name at once, before
// the image that lost it is refreshed (the caller does that next), so that the name
// never resolves to the old image (which the engine no longer gives it).
func TestIndexMovedTagResolvesToTheNewImage(t *testing.T) {
	for _, w := range []write{{event: true}, {}} {
		x := newIndex()
		s0 := x.begin()
		x.replace([]docker.Image{img(1, "a:1", "a:2"), img(2, "b:1")}, s0)
		x.end(s0)
		if !w.event {
			w.start = x.begin()
		}
		touched, ok := x.upsert(ptr(img(3, "a:1")), img(3, "a:1"), w)
		assert.Assert(t, ok)
		assert.DeepEqual(t, touched, []string{id(1)})
		for range 20 { // map order varies: every try must find the new image
			f, ok := x.resolve("a:1")
			assert.Assert(t, ok)
			assert.Equal(t, f.id, id(3), "event write %v", w.event)
		}
		f, ok := x.resolve("a:2")
		assert.Assert(t, ok && f.id == id(1), "the old image keeps its other names")
		if !w.event {
			x.end(w.start)
		}
		assert.DeepEqual(t, view(x.list()), view([]docker.Image{img(1, "a:2"), img(2, "b:1"), img(3, "a:1")}))
	}
}

// Of two entries that name the same reference, resolve answers with the one written last.
func TestIndexResolvePrefersTheLatestWrite(t *testing.T) {
	x := newIndex()
	old, latest := img(1, "a:1"), img(2, "a:1")
	x.byID[old.ID] = newEntry(&old, &old, 1, 1)
	x.byID[latest.ID] = newEntry(&latest, &latest, 2, 2)
	for range 20 {
		f, ok := x.resolve("a:1")
		assert.Assert(t, ok)
		assert.Equal(t, f.id, latest.ID)
	}
}
