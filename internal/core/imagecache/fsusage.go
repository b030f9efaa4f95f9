package imagecache

import (
	"context"
	"sync"
	"time"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// fsUsage remembers the engine's image disk usage, which takes as long as a full
// image list to compute (seconds with the containerd store), for ImageFsInfo.
type fsUsage struct {
	mu         sync.Mutex
	val        docker.ImageFsUsage
	at         time.Time     // when val was computed; zero before the first answer
	changes    uint64        // image changes seen so far
	valChanges uint64        // changes when val's computation started
	inflight   chan struct{} // closed when the background computation under way ends; nil when none is
	refreshes  int
}

// ImageFsUsage answers with the last computed usage and recomputes it in the
// background (one at a time) when it is older than FsUsageMaxAge or images changed
// since. The cache computes it once at start (prefetchFsUsage), beside the first fill,
// so that the first ImageFsInfo does not wait for the engine: until that computation
// ends, an answer waits for it. While the cache is not live (no event tells it about
// changes), answers come from the engine.
func (c *Cache) ImageFsUsage(ctx context.Context) (docker.ImageFsUsage, error) {
	c.mu.Lock()
	st, runCtx := c.st, c.runCtx
	c.mu.Unlock()
	live := st == stateLive && runCtx != nil
	c.fs.mu.Lock()
	if c.fs.at.IsZero() && c.fs.inflight != nil {
		inflight := c.fs.inflight
		c.fs.mu.Unlock()
		select {
		case <-inflight:
		case <-ctx.Done():
			return docker.ImageFsUsage{}, ctx.Err()
		}
		c.fs.mu.Lock()
	}
	have := !c.fs.at.IsZero()
	stale := c.fs.valChanges != c.fs.changes || time.Since(c.fs.at) >= c.cfg.FsUsageMaxAge
	val := c.fs.val
	if live && have && stale {
		c.startRefreshLocked(runCtx)
	}
	c.fs.mu.Unlock()
	if have && live {
		return val, nil
	}
	return c.fetchFsUsage(ctx)
}

// prefetchFsUsage starts computing the usage at the cache's start, unless a value
// or a computation is there already.
func (c *Cache) prefetchFsUsage(runCtx context.Context) {
	c.fs.mu.Lock()
	defer c.fs.mu.Unlock()
	if c.fs.at.IsZero() {
		c.startRefreshLocked(runCtx)
	}
}

// startRefreshLocked starts a background computation unless one is under way.
// Caller holds c.fs.mu.
func (c *Cache) startRefreshLocked(runCtx context.Context) {
	if c.fs.inflight != nil {
		return
	}
	c.fs.inflight = make(chan struct{})
	go c.refreshFsUsage(runCtx, c.fs.inflight)
}

// refreshFsUsage recomputes the usage in the background, within ListTimeout.
func (c *Cache) refreshFsUsage(runCtx context.Context, done chan struct{}) {
	ctx, cancel := c.boundedList(runCtx)
	defer cancel()
	if _, err := c.fetchFsUsage(ctx); err != nil && runCtx.Err() == nil {
		c.log.WithError(err).Warn("image cache: could not recompute image disk usage; serving the last value")
	}
	c.fs.mu.Lock()
	c.fs.inflight = nil
	close(done)
	c.fs.mu.Unlock()
}

// fetchFsUsage asks the engine and remembers the answer, unless one computed from a
// later start is remembered already (it may count images this one does not).
func (c *Cache) fetchFsUsage(ctx context.Context) (docker.ImageFsUsage, error) {
	c.fs.mu.Lock()
	changes := c.fs.changes // changes from now on make the new value stale again
	c.fs.mu.Unlock()
	val, err := c.Client.ImageFsUsage(ctx)
	if err != nil {
		return val, err // what was stale stays stale: the next answer retries
	}
	c.fs.mu.Lock()
	if c.fs.at.IsZero() || changes >= c.fs.valChanges {
		c.fs.val, c.fs.at, c.fs.valChanges = val, time.Now(), changes
		c.fs.refreshes++
	}
	c.fs.mu.Unlock()
	return val, nil
}

// imagesChanged marks the disk usage stale.
func (c *Cache) imagesChanged() {
	c.fs.mu.Lock()
	c.fs.changes++
	c.fs.mu.Unlock()
}
