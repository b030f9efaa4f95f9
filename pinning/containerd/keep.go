package containerd

import (
	"context"
	"errors"
	"sync"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// Pin restore after our own pulls: the engine's pull replaces the labels of the
// image's containerd record, so a pinned record would lose its pin to kubelet's
// PullImage (or the sandbox image's pull). KeepPin notes the pin before the pull and
// the function it returns puts it back after.
const (
	// restoreAttempts bounds the tries to put a pin back.
	restoreAttempts = 5
	// restoreFirstRetry is the pause before the second try; it doubles each time.
	restoreFirstRetry = 200 * time.Millisecond
)

// KeepPin is called before the engine pulls ref. The returned function must be called
// once after the pull, whether it succeeded or not: it puts back the pin label the
// pull removed from ref's record, and ends the serialisation of pulls of that record
// (two pulls of one reference cannot interleave between KeepPin and the restore, where
// the second would read the label the first one's pull had just removed).
//
// Whether the record was pinned is read from containerd before the pull, with a
// context of its own (kubelet cancelling its request must not make a pin look absent).
// When containerd cannot answer, the answer is "unknown": after the pull the record is
// read again and, if its label is gone, the last good snapshot (in memory, or
// restored from the state directory) decides. The restore runs on a context of its
// own too, retried with backoff; failures are logged and counted in SourceStatus.
func (s *Source) KeepPin(ctx context.Context, ref string) func(context.Context) {
	name, ok := imageref.Resolved(ref) // the engine's record name for ref
	if !ok {
		return func(context.Context) {}
	}
	unlock := s.pulls.lock(name)
	log := logctx.For(ctx, s.log).WithField("record", name)
	ctx = context.WithoutCancel(ctx)
	rec, err := s.get(ctx, name)
	if err != nil {
		log.WithError(err).Warn("cannot read the image record before the pull; its pin is decided after it")
	}
	pinned := err == nil && rec.GetLabels()[pin.PinnedLabel] == pin.PinnedValue
	known := err == nil
	return func(context.Context) {
		defer unlock()
		if known && !pinned {
			return
		}
		if !known && !s.wasPinned(name) {
			return
		}
		s.restorePin(ctx, log, name)
	}
}

func (s *Source) recordRestore(name string, restored bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restores.add(name, restored, err, time.Now())
}

// wasPinned reports whether the last good snapshot pinned the record called name.
func (s *Source) wasPinned(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pinnedNames[name]
	return ok
}

// restorePin puts the pin label back on the record called name unless it has it,
// retrying with backoff.
func (s *Source) restorePin(ctx context.Context, log logrus.FieldLogger, name string) {
	var err error
	wait := s.restoreRetry
	for attempt := 1; attempt <= restoreAttempts; attempt++ {
		var restored bool
		if restored, err = s.tryRestore(ctx, name); err == nil {
			s.recordRestore(name, restored, nil)
			if restored {
				log.Info("put back the pin label that the pull removed from the image record")
			}
			return
		}
		if attempt < restoreAttempts {
			time.Sleep(wait)
			wait *= 2
		}
	}
	s.recordRestore(name, false, err)
	log.WithError(err).Error("the pull removed the pin label from the image record and it could not be put back; " +
		"pin the image again (ctr -n " + s.cfg.Namespace + " images label " + name + " " + pin.PinnedLabel + "=" + pin.PinnedValue + ")")
}

// tryRestore puts the label back if the record lacks it; restored tells whether it did.
func (s *Source) tryRestore(ctx context.Context, name string) (restored bool, err error) {
	rec, err := s.get(ctx, name)
	if err != nil {
		return false, err
	}
	if rec.GetLabels()[pin.PinnedLabel] == pin.PinnedValue {
		return false, nil
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	// The update carries the record's current target: containerd requires one even when
	// the field mask names only a label (2.4 dereferences it).
	_, err = s.images.Update(cctx, &imagesapi.UpdateImageRequest{
		Image:      &imagesapi.Image{Name: name, Target: rec.GetTarget(), Labels: map[string]string{pin.PinnedLabel: pin.PinnedValue}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels." + pin.PinnedLabel}},
	})
	return err == nil, err
}

// errNoRecord is get's error for a record that does not exist.
var errNoRecord = errors.New("no such image record")

// get reads the record called name with the source's call timeout.
func (s *Source) get(ctx context.Context, name string) (*imagesapi.Image, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.images.Get(cctx, &imagesapi.GetImageRequest{Name: name})
	if status.Code(err) == codes.NotFound {
		return nil, errNoRecord
	}
	if err != nil {
		return nil, err
	}
	return resp.GetImage(), nil
}

// restoreStats counts pin restores for SourceStatus.
type restoreStats struct {
	restored  int
	failed    int
	lastError string
	lastName  string
	lastAt    time.Time
}

func (r *restoreStats) info() map[string]any {
	return map[string]any{
		"restored": r.restored, "failed": r.failed,
		"lastFailedRecord": r.lastName, "lastError": r.lastError, "lastFailedAt": pin.FormatTime(r.lastAt),
	}
}

// add counts one restore outcome. Caller holds the source's mu.
func (r *restoreStats) add(name string, restored bool, err error, now time.Time) {
	switch {
	case err != nil:
		r.failed++
		r.lastName, r.lastError, r.lastAt = name, err.Error(), now
	case restored:
		r.restored++
	}
}

// keyedMutex is a mutex per key, dropped when nobody holds or waits for it.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
