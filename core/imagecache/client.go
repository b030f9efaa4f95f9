package imagecache

import (
	"context"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// ListImages answers from the index when it is live, else from the engine.
func (c *Cache) ListImages(ctx context.Context) ([]docker.Image, error) {
	live, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	if !live {
		return c.Client.ListImages(ctx)
	}
	return c.idx.list(), nil
}

// InspectImage answers from the index when it knows the image and has its details;
// otherwise it asks the engine and remembers the answer.
func (c *Cache) InspectImage(ctx context.Context, ref string) (docker.Image, error) {
	live, err := c.live(ctx)
	if err != nil {
		return docker.Image{}, err
	}
	if !live {
		return c.Client.InspectImage(ctx, ref)
	}
	if img, inspected, ok := c.idx.resolve(ref); ok && inspected {
		return img, nil
	} else if ok {
		ref = img.ID // known but listed only: fetch its details once
	}
	img, err := c.Client.InspectImage(ctx, ref)
	if err != nil {
		return img, err
	}
	c.store(ctx, img)
	return img, nil
}

// PullImage pulls, then refreshes the pulled image so the next list shows it.
func (c *Cache) PullImage(ctx context.Context, ref string, opts docker.PullOptions) error {
	if err := c.Client.PullImage(ctx, ref, opts); err != nil {
		return err
	}
	return c.refresh(ctx, ref)
}

// RemoveImage removes, then refreshes the image so the next list reflects it.
func (c *Cache) RemoveImage(ctx context.Context, ref string) error {
	id := ref
	if img, _, ok := c.idx.resolve(ref); ok {
		id = img.ID
	}
	if err := c.Client.RemoveImage(ctx, ref); err != nil {
		return err
	}
	return c.refresh(ctx, id)
}

// refresh re-reads one image (by ID or reference) from the engine into the index.
func (c *Cache) refresh(ctx context.Context, ref string) error {
	img, err := c.Client.InspectImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		if strings.HasPrefix(ref, "sha256:") {
			c.idx.remove(ref)
		} else if known, _, ok := c.idx.resolve(ref); ok {
			return c.refresh(ctx, known.ID) // the reference is gone from the image that had it
		}
		return nil
	}
	if err != nil {
		return err
	}
	c.store(ctx, img)
	return nil
}

// store upserts img and refreshes the images it took references from (the engine
// sends no event for an image that loses a tag this way).
func (c *Cache) store(ctx context.Context, img docker.Image) {
	for _, id := range c.idx.upsert(img) {
		other, err := c.Client.InspectImage(ctx, id)
		switch {
		case cerrdefs.IsNotFound(err):
			c.idx.remove(id)
		case err != nil:
			c.log.WithError(err).WithField("id", id).Debug("image cache: could not refresh an image that lost a reference")
		default:
			c.idx.upsert(other)
		}
	}
}
