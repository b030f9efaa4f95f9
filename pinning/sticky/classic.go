package sticky

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/sirupsen/logrus"
)

// ImageWatcher is an optional part of Engine. With it, on the classic image store
// (no containerd lease to keep content by), a pinned image deleted outside the CRI is
// noticed: a preloaded one is loaded again from its archive, any other is reported
// (a warning and verbose Status), as nothing holds its content any more.
type ImageWatcher interface {
	// Images lists the engine's images.
	Images(ctx context.Context) ([]pin.Image, error)
	// WatchImageRemovals calls removed with the event's time after each image delete or
	// untag event, until ctx ends or the stream breaks (the error says why).
	WatchImageRemovals(ctx context.Context, removed func(at time.Time)) error
}

// classicStateName is the state file of the pinned images the classic keeper knows.
const classicStateName = "sticky-images"

// maxReportedLosses bounds the losses Status lists.
const maxReportedLosses = 20

// classicPinned is one pinned image as the classic keeper remembers it.
type classicPinned struct {
	ID string `json:"id"`
	// Names are the references that pin by themselves (patterns, the pins file,
	// preloaded references, the sandbox image); an untag of another name is not a loss.
	Names []string `json:"names,omitempty"`
	// Tags are all its references, for messages.
	Tags []string `json:"tags,omitempty"`
	// Tarball is the preload archive that pins it ("" = none).
	Tarball string `json:"tarball,omitempty"`
}

// ClassicKeeper restores preloaded images deleted outside the CRI on the classic
// image store and reports the other pinned images deleted there.
type ClassicKeeper struct {
	w       ImageWatcher
	reload  Reloader // nil: no preload directory
	p       *pinner.Pinner
	restore bool
	state   statefile.Store
	log     logrus.FieldLogger
	keeperLoop
	checkMu    sync.Mutex
	mu         sync.Mutex
	remembered map[string]classicPinned
	removedAt  time.Time // the latest removal event
	status     ClassicStatus
}

// ClassicStatus is the classic keeper's state for Info ("state").
type ClassicStatus struct {
	Reloaded      int         `json:"reloaded"`
	LastReloaded  string      `json:"lastReloaded,omitempty"`
	LastReloadIn  string      `json:"lastReloadDuration,omitempty"`
	Lost          []lostImage `json:"lost,omitempty"`
	PinnedImages  int         `json:"pinnedImages"`
	LastSync      time.Time   `json:"lastSync"`
	LastSyncError string      `json:"lastSyncError,omitempty"`
}

// lostImage is a pinned image deleted outside the CRI that could not be restored.
type lostImage struct {
	ID     string    `json:"id"`
	Tags   []string  `json:"tags,omitempty"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// NewClassicKeeper returns the keeper of the pins of p on the classic image store,
// watching w; reload (nil: none) loads a preloaded image again. Run it with Run.
func NewClassicKeeper(w ImageWatcher, reload Reloader, p *pinner.Pinner, restore bool, log logrus.FieldLogger) *ClassicKeeper {
	k := &ClassicKeeper{
		w: w, reload: reload, p: p, restore: restore, state: p.StateStore(), log: log,
		keeperLoop: newKeeperLoop(log),
	}
	k.remembered = loadRemembered(k.state, classicStateName, func(c classicPinned) string { return c.ID }, log,
		"sticky pins: cannot read the pinned images known at the last run")
	return k
}

// Run checks at start, on every image removal, on trigger and every interval, until ctx ends.
func (k *ClassicKeeper) Run(ctx context.Context, interval time.Duration) {
	k.run(ctx, interval, func(ctx context.Context) error {
		return k.w.WatchImageRemovals(ctx, func(at time.Time) {
			k.mu.Lock()
			k.removedAt = at
			k.mu.Unlock()
			k.Trigger()
		})
	}, k.check, "sticky pins: cannot check the pinned images; retrying at the next event")
}

// check compares the pinned images with the ones known before: each one gone (or
// with a pinning name gone) is loaded again from its archive, or reported, once.
func (k *ClassicKeeper) check(ctx context.Context) error {
	k.checkMu.Lock()
	defer k.checkMu.Unlock()
	err := k.sync(ctx)
	k.mu.Lock()
	k.status.LastSync, k.status.LastSyncError = time.Now(), pin.ErrString(err)
	k.mu.Unlock()
	return err
}

func (k *ClassicKeeper) sync(ctx context.Context) error {
	// Read before deciding: files read meanwhile only add pins to what is decided.
	partial := len(k.p.PreloadUnread()) > 0
	cur, present, err := k.pinned(ctx)
	if err != nil {
		return err
	}
	k.mu.Lock()
	before := slices.Collect(maps.Values(k.remembered))
	k.mu.Unlock()
	reloaded := map[string]bool{} // archives loaded again in this sync
	for _, c := range before {
		if missing := missingNames(c, present); missing != nil {
			if c.Tarball != "" && reloaded[c.Tarball] {
				continue
			}
			if k.lost(ctx, c, missing) {
				reloaded[c.Tarball] = true
			}
		}
	}
	if len(reloaded) > 0 {
		if cur, _, err = k.pinned(ctx); err != nil {
			return err
		}
	}
	k.mu.Lock()
	if partial {
		// Not all pins are known yet: an image pinned by an unread preload file is not
		// forgotten (nor reported lost: it is not in cur, so not checked above).
		for id, c := range k.remembered {
			if _, ok := cur[id]; !ok {
				cur[id] = c
			}
		}
	}
	changed := !maps.EqualFunc(cur, k.remembered, func(a, b classicPinned) bool {
		return a.ID == b.ID && a.Tarball == b.Tarball && slices.Equal(a.Names, b.Names) && slices.Equal(a.Tags, b.Tags)
	})
	k.remembered = cur
	k.status.PinnedImages = len(cur)
	k.mu.Unlock()
	if changed {
		list := slices.SortedFunc(maps.Values(cur), func(a, b classicPinned) int { return strings.Compare(a.ID, b.ID) })
		if err := k.state.Save(classicStateName, list); err != nil {
			k.log.WithError(err).Warn("sticky pins: cannot save the pinned images; one deleted while we are not running is not noticed")
		}
	}
	return nil
}

// pinned lists the engine's pinned images, and the IDs and references present.
func (k *ClassicKeeper) pinned(ctx context.Context) (map[string]classicPinned, map[string]bool, error) {
	imgs, err := k.w.Images(ctx)
	if err != nil {
		return nil, nil, err
	}
	reasons, err := k.p.Decide(ctx, imgs)
	if err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	var names []pin.Image // one per tag of a pinned image, to find the names that pin by themselves
	var owner []string
	out := map[string]classicPinned{}
	for i, img := range imgs {
		present[img.ID] = true
		for _, t := range img.RepoTags {
			present[t] = true
		}
		if len(reasons[i]) == 0 {
			continue
		}
		out[img.ID] = classicPinned{ID: img.ID, Tags: slices.Clone(img.RepoTags), Tarball: pin.PreloadTarball(reasons[i])}
		for _, t := range img.RepoTags {
			names = append(names, pin.Image{RepoTags: []string{t}})
			owner = append(owner, img.ID)
		}
	}
	if len(names) > 0 {
		byName, err := k.p.Decide(ctx, names)
		if err != nil {
			return nil, nil, err
		}
		for i, rs := range byName {
			if len(rs) > 0 {
				c := out[owner[i]]
				c.Names = append(c.Names, names[i].RepoTags[0])
				out[owner[i]] = c
			}
		}
	}
	return out, present, nil
}

// missingNames returns what of c is gone: its ID, or its names that pin; nil when nothing is.
func missingNames(c classicPinned, present map[string]bool) []string {
	if !present[c.ID] {
		return append([]string{c.ID}, c.Tags...)
	}
	var out []string
	for _, n := range c.Names {
		if !present[n] {
			out = append(out, n)
		}
	}
	return out
}

// lost handles a pinned image deleted outside the CRI: loaded again from its archive
// when one pins it (reloaded is true), else reported.
func (k *ClassicKeeper) lost(ctx context.Context, c classicPinned, missing []string) (reloaded bool) {
	entry := k.log.WithField("image", c.ID).WithField("missing", missing)
	if !k.restore {
		entry.Info("sticky pins: a pinned image was deleted outside the CRI; --restore-pinned-images=false leaves it deleted")
		return false
	}
	why := "the classic image store keeps no content for it: only preloaded images can be restored there (from their archive)"
	if c.Tarball != "" && k.reload != nil {
		ref := c.ID
		if len(c.Tags) > 0 {
			ref = c.Tags[0]
		}
		if _, err := k.reload(ctx, ref); err != nil {
			why = "loading its preload archive " + c.Tarball + " again failed: " + err.Error()
		} else {
			k.reloaded(c, entry)
			return true
		}
	}
	k.mu.Lock()
	k.status.Lost = append(k.status.Lost, lostImage{ID: c.ID, Tags: c.Tags, Reason: why, At: time.Now()})
	if n := len(k.status.Lost); n > maxReportedLosses {
		k.status.Lost = slices.Clone(k.status.Lost[n-maxReportedLosses:])
	}
	k.mu.Unlock()
	entry.WithField("tags", c.Tags).Warn("sticky pins: a pinned image was deleted outside the CRI and cannot be restored: " + why)
	return false
}

func (k *ClassicKeeper) reloaded(c classicPinned, entry logrus.FieldLogger) {
	k.mu.Lock()
	k.status.Reloaded++
	k.status.LastReloaded = c.Tarball
	if !k.removedAt.IsZero() {
		d := time.Since(k.removedAt)
		k.status.LastReloadIn = d.String()
		entry = entry.WithField("duration", d)
	}
	k.mu.Unlock()
	entry.WithField("tarball", c.Tarball).Info("sticky pins: pinned image restored after its delete, by loading its preload archive again")
}

// Info is the keeper's state for crictl info.
func (k *ClassicKeeper) Info() map[string]any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return map[string]any{"lease": "none: the classic image store", "restore": k.restore, "state": k.status}
}
