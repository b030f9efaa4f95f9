package preload

import (
	"context"
	"fmt"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// DefaultWait is the default bound of WaitPreloaded (--preload-image-status-wait).
const DefaultWait = time.Minute

// WaitFor waits while a file of the directory that is not processed yet may provide
// ref (an archive queued or loading that names ref or whose content is not known
// yet, or a list naming ref whose pull has not been tried or is in its first try),
// at most the directory's wait, or until ctx ends. It reports whether it waited.
func (d *Dir) WaitFor(ctx context.Context, ref string) bool {
	if d.wait <= 0 {
		return false
	}
	key := imageref.Key(ref)
	var timer *time.Timer
	start := time.Now()
	for {
		d.mu.Lock()
		pending := d.pendingLocked(key)
		ch := d.changed
		d.mu.Unlock()
		if pending == "" {
			if timer != nil {
				timer.Stop()
				logctx.For(ctx, d.log).WithField("image", ref).WithField("waited", time.Since(start).Round(time.Millisecond).String()).
					Debug("preload: waited for a pending preload file")
			}
			return timer != nil
		}
		if timer == nil {
			d.mu.Lock()
			d.waiting++
			d.mu.Unlock()
			defer func() {
				d.mu.Lock()
				d.waiting--
				d.mu.Unlock()
			}()
			timer = time.NewTimer(d.wait)
			logctx.For(ctx, d.log).WithField("image", ref).WithField("file", pending).
				Info("preload: image not present yet; waiting for the preload file that provides it")
		}
		select {
		case <-ch:
		case <-timer.C:
			logctx.For(ctx, d.log).WithField("image", ref).WithField("file", pending).WithField("wait", d.wait.String()).
				Warn("preload: image still not provided after the wait; answering without it")
			return true
		case <-ctx.Done():
			timer.Stop()
			return true
		case <-d.bg.Done():
			timer.Stop()
			return true
		}
	}
}

// pendingLocked returns the name of a file that may still provide the image key; "".
func (d *Dir) pendingLocked(key string) string {
	for name, f := range d.files {
		if f.kind == pinner.PreloadList {
			if !f.refsKnown || f.done == (fileSig{}) {
				return name // not read yet
			}
			for ref, im := range f.images {
				if (im.state == listPending || im.state == listPulling) && im.attempts == 0 && imageref.Key(ref) == key {
					return name
				}
			}
			continue
		}
		if f.view.State != pinner.PreloadPending {
			continue
		}
		if !f.refsKnown || slices.ContainsFunc(f.view.Refs, func(r string) bool { return imageref.Key(r) == key }) {
			return name
		}
	}
	return ""
}

// ReloadFor loads again the archive that names ref (or pulls ref again when a list
// names it) and returns the file's name; NotFound when no file provides ref.
func (d *Dir) ReloadFor(ctx context.Context, ref string) (string, error) {
	key := imageref.Key(ref)
	d.mu.Lock()
	var name, kind string
	for _, f := range d.sortedLocked() {
		if slices.ContainsFunc(f.view.Refs, func(r string) bool { return imageref.Key(r) == key }) {
			name, kind = f.name, f.kind
			if kind == pinner.PreloadArchive {
				break
			}
		}
	}
	d.mu.Unlock()
	switch {
	case name == "":
		return "", fmt.Errorf("no file of the preload directory provides %s: %w", ref, cerrdefs.ErrNotFound)
	case kind == pinner.PreloadList:
		if d.puller == nil {
			return name, fmt.Errorf("preload list %s names %s but this host does not pull: %w", name, ref, cerrdefs.ErrNotImplemented)
		}
		return name, d.puller.PullImage(ctx, ref)
	}
	_, err := d.loadArchive(ctx, name, fileSig{})
	return name, err
}

func (d *Dir) sortedLocked() []*preloadFile {
	out := make([]*preloadFile, 0, len(d.files))
	for _, f := range d.files {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *preloadFile) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}
