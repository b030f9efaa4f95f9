package sticky

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/pinning/containerd"
	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// Sticky pins on the containerd image store: the content of every pinned image is
// held by one well-known containerd lease in the engine's namespace (content under a
// lease is not garbage-collected, whoever deletes the image record), and the records
// of pinned images are remembered (in the state directory too), so that a record
// deleted outside the CRI (docker rmi, docker image prune -a, ctr images rm) is
// created again from the leased content. k3s holds the images of its air-gap
// directory the same way, with one lease named after the program ("k3s"), re-taken
// at every start.
const (
	// DefaultLeaseID is the containerd lease holding the content of the pinned images
	// of the instance with the default root directory (deleted by Release); another
	// instance's lease is named after its root directory (pinning.LeaseFor), so that
	// two instances on one engine never release each other's pins.
	DefaultLeaseID = "dockpin.pinned"
	// stickyStateName is the state file of the remembered records.
	stickyStateName = "sticky-records"
	// Interval is how often the lease is re-derived without an event.
	Interval = time.Minute
)

// Reloader loads (or, for a list, pulls) again the preload file that provides
// ref and returns its name; NotFound when no file does (Setup.ReloadArchiveFor).
type Reloader func(ctx context.Context, ref string) (string, error)

// Keeper keeps the lease in step with the pins and restores deleted records.
type Keeper struct {
	st              containerd.Store
	p               *pinner.Pinner
	state           statefile.Store
	log             logrus.FieldLogger
	restore         bool // --restore-pinned-images
	includeDangling bool
	lease           string   // this instance's lease: it also owns the preload labels it sets
	reloadFile      Reloader // loads preload archives again; nil: none
	keeperLoop

	reconcileMu sync.Mutex // one reconcile at a time
	walks       map[string]imageContent

	mu         sync.Mutex
	remembered map[string]containerd.Record // the records of pinned images, by name
	deletedAt  map[string]time.Time         // when a remembered record's delete event came
	restoredAt map[string]time.Time         // records restored before their delete event came
	eventSeq   uint64                       // image events seen
	// eventLabels are the labels create and update events gave remembered records, with the event's number.
	eventLabels map[string]seqLabels
	status      stickyStatus
}

type seqLabels struct {
	seq    uint64
	labels map[string]string
}

// stickyStatus is the keeper's state for Info.
type stickyStatus struct {
	LeasedBlobs   int       `json:"leasedBlobs"`
	LeasedBytes   int64     `json:"leasedBytes"`
	PinnedImages  int       `json:"pinnedImages"`
	Records       int       `json:"rememberedRecords"`
	Restored      int       `json:"restored"`
	LastRestored  string    `json:"lastRestored,omitempty"`
	LastRestoreIn string    `json:"lastRestoreDuration,omitempty"`
	Failed        int       `json:"restoreFailed"`
	LastFailure   string    `json:"lastRestoreFailure,omitempty"`
	LastSync      time.Time `json:"lastSync"`
	LastSyncError string    `json:"lastSyncError,omitempty"`
	// Unreadable are the images (a record's name: why) whose content cannot be read.
	Unreadable []string `json:"unreadable,omitempty"`
	// PreloadUnread are the preload files present at start not read yet: until they
	// are, what is known to be pinned is leased and restored, and nothing released.
	PreloadUnread []string `json:"preloadUnread,omitempty"`
}

// NewKeeper returns the keeper of the lease over st for the pins of p; reload (nil:
// none) loads a preloaded image again. Run it with Run.
func NewKeeper(st containerd.Store, p *pinner.Pinner, reload Reloader, restore, includeDangling bool, lease string, log logrus.FieldLogger) *Keeper {
	k := &Keeper{
		st: st, p: p, reloadFile: reload, state: p.StateStore(), log: log, restore: restore, includeDangling: includeDangling, lease: lease,
		keeperLoop: newKeeperLoop(log), walks: map[string]imageContent{},
		deletedAt: map[string]time.Time{}, restoredAt: map[string]time.Time{}, eventLabels: map[string]seqLabels{},
	}
	k.remembered = loadRemembered(k.state, stickyStateName, func(r containerd.Record) string { return r.Name }, log,
		"sticky pins: cannot read the remembered image records; records deleted while we were not running are not restored")
	return k
}

// Run reconciles at start, on every image event, on trigger and every interval, until ctx ends.
func (k *Keeper) Run(ctx context.Context, interval time.Duration) {
	k.run(ctx, interval, func(ctx context.Context) error { return k.st.ImageEvents(ctx, k.onEvent) }, k.reconcile,
		"sticky pins: cannot bring the lease and the pinned image records in step; retrying at the next event")
}

// onEvent notes what an event tells about a remembered record and triggers a
// reconcile. Labels are taken from the event at once: a pin label removed just before
// the record is deleted must not bring the record back.
func (k *Keeper) onEvent(ev containerd.Event) {
	k.mu.Lock()
	k.eventSeq++
	rec, ok := k.remembered[ev.Name]
	k.log.WithField("topic", ev.Topic).WithField("record", ev.Name).WithField("at", ev.At).WithField("remembered", ok).Debug("sticky pins: image event")
	if ok {
		switch ev.Topic {
		case containerd.TopicImageDelete:
			at := ev.At
			if at.IsZero() || at.Unix() <= 0 {
				at = time.Now()
			}
			if done, ok := k.restoredAt[ev.Name]; ok && done.After(at) {
				// Restored by a reconcile that saw the record gone before its event came.
				delete(k.restoredAt, ev.Name)
				k.restoreTook(ev.Name, done.Sub(at))
			} else {
				k.deletedAt[ev.Name] = at
			}
		case containerd.TopicImageCreate, containerd.TopicImageUpdate:
			rec.Labels = ev.Labels
			k.remembered[ev.Name] = rec
			k.eventLabels[ev.Name] = seqLabels{seq: k.eventSeq, labels: ev.Labels}
		}
	}
	k.mu.Unlock()
	k.Trigger()
}

// target is one image (a target digest) in a reconcile.
type stickyTarget struct {
	desc    containerd.Descriptor
	present []containerd.Record // its records, dangling ones included
	absent  []containerd.Record // its remembered records that are gone
	content imageContent
	walkErr error // its content could not be read (a bad blob): skipped, reported
	reasons []pin.Reason
	pinned  bool
}

// reconcile re-derives everything from the current pins: the preload labels, the
// remembered records, the records to restore and the lease's content. On an error
// nothing is released.
func (k *Keeper) reconcile(ctx context.Context) error {
	k.reconcileMu.Lock()
	defer k.reconcileMu.Unlock()
	err := k.sync(ctx)
	k.mu.Lock()
	k.status.LastSync, k.status.LastSyncError = time.Now(), pin.ErrString(err)
	k.mu.Unlock()
	return err
}

func (k *Keeper) sync(ctx context.Context) error {
	k.mu.Lock()
	listedAt := k.eventSeq
	k.mu.Unlock()
	listTime := time.Now()
	// Read before deciding: files read meanwhile only add pins to what is decided.
	unread := k.p.PreloadUnread()
	k.mu.Lock()
	k.status.PreloadUnread = unread
	k.mu.Unlock()
	recs, err := k.st.Records(ctx)
	if err != nil {
		return err
	}
	targets, order := k.group(recs)
	if err := k.walk(ctx, targets, order); err != nil {
		return err
	}
	if err := k.decide(ctx, targets, order); err != nil {
		return err
	}
	k.labelPreloaded(ctx, targets, order)
	restored := k.restoreRecords(ctx, targets, order)
	partial := len(unread) > 0
	if err := k.syncLease(ctx, targets, order, partial); err != nil {
		return err
	}
	k.remember(targets, order, restored, listedAt, listTime, partial)
	return nil
}

// group sorts the records and the remembered ones that are gone by target.
func (k *Keeper) group(recs []containerd.Record) (map[string]*stickyTarget, []string) {
	targets := map[string]*stickyTarget{}
	var order []string
	at := func(d containerd.Descriptor) *stickyTarget {
		t := targets[d.Digest]
		if t == nil {
			t = &stickyTarget{desc: d}
			targets[d.Digest] = t
			order = append(order, d.Digest)
		}
		return t
	}
	names := make(map[string]bool, len(recs))
	for _, r := range recs {
		names[r.Name] = true
		if r.Target.Digest == "" {
			continue
		}
		at(r.Target).present = append(at(r.Target).present, r)
	}
	k.mu.Lock()
	for name, r := range k.remembered {
		if !names[name] {
			at(r.Target).absent = append(at(r.Target).absent, r)
		}
	}
	k.mu.Unlock()
	for _, t := range targets {
		slices.SortFunc(t.absent, func(a, b containerd.Record) int { return strings.Compare(a.Name, b.Name) })
	}
	return targets, order
}

// walk finds each target's content (cached: content is immutable), dropping the
// cache entries of images gone.
func (k *Keeper) walk(ctx context.Context, targets map[string]*stickyTarget, order []string) error {
	for _, d := range order {
		t := targets[d]
		c, ok := k.walks[d]
		if !ok {
			var err error
			c, err = walkContent(ctx, k.st, t.desc)
			if errors.Is(err, containerd.ErrNoBlob) {
				continue // its content is gone: nothing to lease, nothing to restore from
			}
			if ctx.Err() != nil {
				return err
			}
			if err != nil {
				// One image whose content cannot be read (a target that does not decode, a
				// blob over the bound) must not stop the others from being leased and
				// restored: it is skipped and reported, and while any is, nothing is
				// released (its blobs cannot be told from the others').
				t.walkErr = err
				continue
			}
			k.walks[d] = c
		}
		t.content = c
	}
	for d := range k.walks {
		if targets[d] == nil {
			delete(k.walks, d)
		}
	}
	k.reportUnreadable(targets, order)
	return nil
}

// reportUnreadable logs the images whose content could not be read, when that set
// changes, and keeps it for the status.
func (k *Keeper) reportUnreadable(targets map[string]*stickyTarget, order []string) {
	var bad []string
	for _, d := range order {
		if t := targets[d]; t.walkErr != nil {
			name := d
			if len(t.present) > 0 {
				name = t.present[0].Name
			}
			bad = append(bad, name+": "+t.walkErr.Error())
		}
	}
	k.mu.Lock()
	changed := !slices.Equal(bad, k.status.Unreadable)
	k.status.Unreadable = bad
	k.mu.Unlock()
	if changed && len(bad) > 0 {
		k.log.WithField("images", bad).Warn("sticky pins: the content of some images cannot be read: they are skipped (not leased, not restored), and nothing is released until they can be read")
	}
}

// names returns the non-dangling names of the records, present and gone.
func (k *Keeper) names(t *stickyTarget) []string {
	var out []string
	for _, rs := range [][]containerd.Record{t.present, t.absent} {
		for _, r := range rs {
			if !strings.HasPrefix(r.Name, pin.DanglingPrefix) || k.includeDangling {
				out = append(out, r.Name)
			}
		}
	}
	return out
}

// decide asks the pins about every target (all its names, present or gone) and
// about each gone record's name alone.
func (k *Keeper) decide(ctx context.Context, targets map[string]*stickyTarget, order []string) error {
	imgs := make([]pin.Image, 0, len(order))
	for _, d := range order {
		t := targets[d]
		names := k.names(t)
		img := pin.Image{ID: d, RepoTags: names, Labels: t.content.Labels}
		for _, n := range names {
			if r, err := imageref.Parse(n); err == nil && !strings.HasPrefix(n, pin.DanglingPrefix) {
				img.RepoDigests = append(img.RepoDigests, r.Name+"@"+d) // as the engine shows it: repository@target
			}
		}
		imgs = append(imgs, img)
	}
	reasons, err := k.p.Decide(ctx, imgs)
	if err != nil {
		return err
	}
	for i, d := range order {
		t := targets[d]
		t.reasons = reasons[i]
		t.pinned = len(t.reasons) > 0
		// The record-label source lists on its own: a record deleted between our
		// listing and its snapshot is unpinned there, but this reconcile still sees it
		// present, would release its content and forget it. What this listing shows
		// decides for the records in it.
		for _, r := range t.present {
			if !t.pinned && pin.RecordPinsByLabel(r.Name, r.Labels, k.includeDangling) {
				t.pinned = true
				t.reasons = append(t.reasons, pin.Reason{Source: pin.SourceContainerd, Detail: "record " + r.Name})
			}
		}
		for _, r := range t.absent {
			if pin.RecordPinsByLabel(r.Name, r.Labels, k.includeDangling) {
				t.pinned = true // the labelled record itself is what was deleted
				t.reasons = append(t.reasons, pin.Reason{Source: pin.SourceContainerd, Detail: "record " + r.Name + " (deleted)"})
			}
		}
	}
	return nil
}

// restoreRecords creates again the gone records of pinned images: each that pins
// by itself (its name matches a pattern, or it carries the pin label), and every one
// of an image left without a name. It returns the records restored.
func (k *Keeper) restoreRecords(ctx context.Context, targets map[string]*stickyTarget, order []string) []containerd.Record {
	var restored []containerd.Record
	for _, d := range order {
		t := targets[d]
		if !t.pinned || len(t.absent) == 0 || !k.restore {
			continue
		}
		if len(t.content.Blobs) > 0 {
			// The walk may be cached: the target itself must still be there.
			if _, err := k.st.BlobSize(ctx, d); errors.Is(err, containerd.ErrNoBlob) {
				delete(k.walks, d)
				t.content = imageContent{}
			}
		}
		if len(t.content.Blobs) == 0 {
			k.reload(ctx, t) // the lease did not hold it (not yet, or taken away)
			continue
		}
		named := false
		for _, r := range t.present {
			named = named || !strings.HasPrefix(r.Name, pin.DanglingPrefix)
		}
		for _, r := range t.absent {
			if named && !pin.RecordPinsByLabel(r.Name, r.Labels, k.includeDangling) && !k.namePins(ctx, r.Name) {
				continue
			}
			if err := k.st.CreateRecord(ctx, r); err != nil {
				k.failed(r.Name, err.Error())
				continue
			}
			restored = append(restored, r)
			k.restoredOne(r, t.reasons)
		}
	}
	return restored
}

// reload loads the preload archive of an image whose content is gone again, or
// reports that it cannot be restored.
func (k *Keeper) reload(ctx context.Context, t *stickyTarget) {
	name := t.absent[0].Name
	tarball := pin.PreloadTarball(t.reasons)
	if tarball == "" || k.reloadFile == nil {
		k.failed(name, "its content is gone from the store")
		return
	}
	if file, err := k.reloadFile(ctx, name); err != nil {
		k.failed(name, "its content is gone and loading its preload file "+file+" again failed: "+err.Error())
		return
	}
	for _, r := range t.absent {
		k.restoredOne(r, t.reasons)
	}
}

// namePins tells whether the record name alone is pinned (a pattern, the pins file,
// a preloaded reference, the sandbox image).
func (k *Keeper) namePins(ctx context.Context, name string) bool {
	rs, err := k.p.Decide(ctx, []pin.Image{{RepoTags: []string{name}}})
	return err == nil && len(rs[0]) > 0
}

func (k *Keeper) restoredOne(r containerd.Record, reasons []pin.Reason) {
	now := time.Now()
	k.mu.Lock()
	at, ok := k.deletedAt[r.Name]
	delete(k.deletedAt, r.Name)
	if !ok {
		k.restoredAt[r.Name] = now // its delete event is still on its way
	}
	k.status.Restored++
	k.status.LastRestored = r.Name
	k.mu.Unlock()
	k.log.WithField("record", r.Name).WithField("image", r.Target.Digest).WithField("pinReasons", reasons).
		Info("sticky pins: restored the deleted record of a pinned image from its leased content")
	if ok {
		k.mu.Lock()
		k.restoreTook(r.Name, now.Sub(at))
		k.mu.Unlock()
	}
}

// restoreTook logs and keeps how long after its delete a record was back. Caller holds mu.
func (k *Keeper) restoreTook(name string, d time.Duration) {
	k.status.LastRestoreIn = d.String()
	k.log.WithField("record", name).WithField("duration", d).Info("sticky pins: pinned image restored after its delete")
}

func (k *Keeper) failed(name, why string) {
	k.mu.Lock()
	k.status.Failed++
	k.status.LastFailure = name + ": " + why
	k.mu.Unlock()
	k.log.WithField("record", name).Warn("sticky pins: cannot restore the deleted record of a pinned image: " + why)
}

// syncLease makes the lease hold exactly the content of the pinned images; partial
// (the pins are not all known yet) makes it add only.
func (k *Keeper) syncLease(ctx context.Context, targets map[string]*stickyTarget, order []string, partial bool) error {
	want := map[string]int64{}
	pinned := 0
	for _, d := range order {
		if t := targets[d]; t.pinned {
			pinned++
			maps.Copy(want, t.content.Blobs)
		}
	}
	if err := k.st.EnsureLease(ctx, k.lease); err != nil {
		return err
	}
	have, err := k.st.LeasedContent(ctx, k.lease)
	if err != nil {
		return err
	}
	held := make(map[string]bool, len(have))
	for _, d := range have {
		held[d] = true
	}
	var added, released int
	for _, d := range slices.Sorted(maps.Keys(want)) {
		if !held[d] {
			if err := k.st.Lease(ctx, k.lease, d); err != nil {
				return err
			}
			added++
		}
	}
	hold := partial || slices.ContainsFunc(order, func(d string) bool { return targets[d].walkErr != nil })
	for _, d := range have {
		if _, ok := want[d]; !ok && !hold {
			if err := k.st.Release(ctx, k.lease, d); err != nil {
				return err
			}
			released++
		}
	}
	var bytes int64
	for _, n := range want {
		bytes += n
	}
	if added+released > 0 {
		k.log.WithField("added", added).WithField("released", released).WithField("blobs", len(want)).
			WithField("bytes", bytes).WithField("images", pinned).Info("sticky pins: lease " + k.lease + " in step with the pins")
	}
	k.mu.Lock()
	k.status.LeasedBlobs, k.status.LeasedBytes, k.status.PinnedImages = len(want), bytes, pinned
	k.mu.Unlock()
	return nil
}

// remember keeps the records of pinned images (present or just restored) and saves
// them when they changed; records of images no longer pinned are forgotten, unless
// the pins are partial (not all known yet): then nothing is.
func (k *Keeper) remember(targets map[string]*stickyTarget, order []string, restored []containerd.Record, listedAt uint64, listTime time.Time, partial bool) {
	next := map[string]containerd.Record{}
	for _, d := range order {
		t := targets[d]
		if !t.pinned {
			continue
		}
		for _, r := range t.present {
			if !strings.HasPrefix(r.Name, pin.DanglingPrefix) {
				next[r.Name] = r
			}
		}
	}
	for _, r := range restored {
		next[r.Name] = r
	}
	k.mu.Lock()
	if partial {
		for name, r := range k.remembered {
			if _, ok := next[name]; !ok {
				next[name] = r
			}
		}
	}
	for name, r := range next {
		// An event newer than this reconcile's listing knows the record's labels better.
		if ev, ok := k.eventLabels[name]; ok && ev.seq > listedAt {
			r.Labels = ev.labels
			next[name] = r
		}
	}
	listed := map[string]bool{}
	for _, d := range order {
		for _, r := range targets[d].present {
			listed[r.Name] = true
		}
	}
	for name, at := range k.deletedAt {
		// Gone from the pins, or created again (not by us) after its delete: done with.
		if _, ok := next[name]; !ok || listed[name] && at.Before(listTime) {
			delete(k.deletedAt, name)
		}
	}
	clear(k.eventLabels)
	for name, at := range k.restoredAt {
		if time.Since(at) > time.Minute { // its delete event never came
			delete(k.restoredAt, name)
		}
	}
	changed := !maps.EqualFunc(next, k.remembered, sameRecord)
	k.remembered = next
	k.status.Records = len(next)
	k.mu.Unlock()
	if !changed {
		return
	}
	list := slices.SortedFunc(maps.Values(next), func(a, b containerd.Record) int { return strings.Compare(a.Name, b.Name) })
	if err := k.state.Save(stickyStateName, list); err != nil {
		k.log.WithError(err).Warn("sticky pins: cannot save the records of pinned images; one deleted while we are not running is not restored")
	}
}

func sameRecord(a, b containerd.Record) bool {
	return a.Name == b.Name && a.Target == b.Target && maps.Equal(a.Labels, b.Labels)
}

// Info is the keeper's state for crictl info ("sticky").
func (k *Keeper) Info() map[string]any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return map[string]any{
		"lease": k.lease, "restore": k.restore, "state": k.status,
	}
}
