package imagecache

import (
	"context"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// ListImages answers from the index when it is live, else (starting, fallback) from the engine.
func (c *Cache) ListImages(ctx context.Context) ([]docker.Image, error) {
	if !c.live() {
		return c.Client.ListImages(ctx)
	}
	return c.idx.list(), nil
}

// InspectImage answers from the index when it has the image's details; otherwise it
// asks the engine and remembers the answer.
func (c *Cache) InspectImage(ctx context.Context, ref string) (docker.Image, error) {
	if !c.live() {
		return c.Client.InspectImage(ctx, ref)
	}
	if f, ok := c.idx.resolve(ref); ok {
		if f.inspected != nil {
			logctx.Time(ctx, "imagecache.hit")() // an image check the engine did not have to answer
			return *f.inspected, nil
		}
		ref = f.id // known from the list only: fetch its details once
	}
	return c.refreshFor(ctx, ref)
}

// PullImage pulls, then refreshes the pulled image so the next list shows it.
func (c *Cache) PullImage(ctx context.Context, ref string, opts docker.PullOptions) error {
	if err := c.Client.PullImage(ctx, ref, opts); err != nil {
		return err
	}
	c.imagesChanged()
	// NotFound: another client removed the image right after the pull. The pull still
	// succeeded and the index now agrees with the engine; the caller's own lookup
	// finds the image gone (core pulls again then).
	if _, err := c.refreshFor(ctx, ref); err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// RemoveImage removes, then refreshes the image so the next list reflects it. So it
// does when the engine answers NotFound: another call removed the image first (several
// RemoveImage of one image at once: those that lost the race get NotFound, which the
// CRI's RemoveImage answers as success, before the one that won has returned and
// before the delete's events are applied). That error is returned, after the refresh.
func (c *Cache) RemoveImage(ctx context.Context, ref string) error {
	id := ref
	if f, ok := c.idx.resolve(ref); ok {
		id = f.id
	}
	err := c.Client.RemoveImage(ctx, ref)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	c.imagesChanged()
	if _, rerr := c.refreshFor(ctx, id); rerr != nil && !cerrdefs.IsNotFound(rerr) {
		return rerr
	}
	return err
}

// refreshFor refreshes an image for a request: what the engine answers loses to
// what events applied meanwhile wrote (see index).
func (c *Cache) refreshFor(ctx context.Context, ref string) (docker.Image, error) {
	start := c.idx.begin()
	defer c.idx.end(start)
	return c.refresh(ctx, ref, true, write{start: start})
}

// refresh re-reads one image (by ID or reference) from the engine into the index and
// returns its inspect view; NotFound when it is gone. With cascade, images that lost
// one of its references are refreshed too (the engine sends no event for them).
func (c *Cache) refresh(ctx context.Context, ref string, cascade bool, w write) (docker.Image, error) {
	insp, err := c.Client.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		if strings.HasPrefix(ref, "sha256:") {
			c.idx.remove(ref, w)
		} else if f, ok := c.idx.resolve(ref); ok && cascade {
			_, _ = c.refresh(ctx, f.id, false, w) // the reference is gone from the image that had it
		}
		return insp, err
	}
	if err != nil {
		return insp, err
	}
	// Until the next resync the list view is the inspect view: the engine's list can
	// differ in RepoDigests (containerd store), and the debounced resync after events
	// brings the exact list.
	listed := insp
	listed.User = ""
	touched, _ := c.idx.upsert(&listed, insp, w)
	if cascade {
		for _, id := range touched {
			if _, err := c.refresh(ctx, id, false, w); err != nil && !cerrdefs.IsNotFound(err) {
				return insp, err
			}
		}
	}
	return insp, nil
}
