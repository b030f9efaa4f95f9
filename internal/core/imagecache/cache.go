package imagecache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Config tunes the cache.
type Config struct {
	// ResyncInterval is how often the whole index is reconciled with the engine's list.
	ResyncInterval time.Duration
	// RetryInterval is the wait before re-establishing a broken event stream.
	RetryInterval time.Duration
	// EventReplay is how far before a (re)subscription the engine is asked to replay
	// events, so that none falls between the subscription and the full list.
	EventReplay time.Duration
	// SettleDelay is how long after the last of a burst of events the index is
	// reconciled with a full list in the background. Events refresh the images they
	// name at once; this brings what only the engine's list computes (with the
	// containerd store its RepoDigests differ from inspect's).
	SettleDelay time.Duration
	// FsUsageMaxAge is how old the image disk usage served by ImageFsInfo may get
	// before it is recomputed in the background.
	FsUsageMaxAge time.Duration
	// CallTimeout bounds each engine call the cache makes on its own (the ping before
	// subscribing, the inspects behind events), so that a hung engine cannot wedge it:
	// the call fails, the cache answers from the engine and starts over. Calls made for
	// a request use the request's deadline instead; the event stream itself lives as
	// long as its session.
	CallTimeout time.Duration
	// ListTimeout bounds the calls whose cost grows with the number of images: the
	// full lists of fills and resyncs and the disk usage recomputation. It must exceed
	// the time the engine takes for them: seconds usually, over 30 s with 10,000 images
	// on the containerd store. Meanwhile the cache answers from the engine (a fill) or
	// from its index (a resync, the disk usage), so a long bound wedges nothing.
	ListTimeout time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ResyncInterval: 5 * time.Minute, RetryInterval: time.Second, EventReplay: 5 * time.Second, SettleDelay: time.Second, FsUsageMaxAge: time.Minute, CallTimeout: 30 * time.Second,
		ListTimeout: 10 * time.Minute}
}

// Validate reports values the cache cannot use; zero values mean the defaults
// (EventReplay: no replay).
func (c Config) Validate() error {
	for name, d := range map[string]time.Duration{
		"resync interval": c.ResyncInterval, "retry interval": c.RetryInterval, "event replay": c.EventReplay,
		"settle delay": c.SettleDelay, "disk usage max age": c.FsUsageMaxAge, "call timeout": c.CallTimeout,
		"list timeout": c.ListTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("image cache %s %s is negative: %w", name, d, cerrdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// withDefaults replaces zero and negative values (but a zero EventReplay) with the defaults.
func (c Config) withDefaults() Config {
	def := DefaultConfig()
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.ResyncInterval, &def.ResyncInterval}, {&c.RetryInterval, &def.RetryInterval}, {&c.SettleDelay, &def.SettleDelay},
		{&c.FsUsageMaxAge, &def.FsUsageMaxAge}, {&c.CallTimeout, &def.CallTimeout}, {&c.ListTimeout, &def.ListTimeout},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	c.EventReplay = max(c.EventReplay, 0)
	return c
}

// state is where the cache is in its life.
type state int

const (
	stateStarting state = iota // first fill under way: requests go to the engine
	stateLive                  // answering from the index
	stateFallback              // stream down: requests go to the engine
)

func (s state) String() string {
	return [...]string{StateStarting, StateLive, StateFallback}[s]
}

// Cache is a docker.Client whose image reads come from an event-driven index.
type Cache struct {
	docker.Client // the engine; every method not overridden goes straight to it

	cfg Config
	log logrus.FieldLogger
	idx *index
	fs  fsUsage

	mu         sync.Mutex
	runCtx     context.Context // Run's context, for background work; nil before Run
	st         state
	reason     string // why the cache is in fallback
	lastResync time.Time
	resyncs    int
	events     int
	reconnects int
}

var _ docker.Client = (*Cache)(nil)

// New returns a cache over engine; call Run to fill it and keep it current. Until the
// first fill is done requests go to the engine. Zero (or negative) fields of cfg take
// the defaults; see Config.Validate.
func New(engine docker.Client, cfg Config, log logrus.FieldLogger) *Cache {
	return &Cache{Client: engine, cfg: cfg.withDefaults(), log: logctx.OrDiscard(log), idx: newIndex(), st: stateStarting}
}

func (c *Cache) setState(st state, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st, c.reason = st, reason
}

// live tells whether the index may answer: never while starting or in fallback,
// where requests go to the engine rather than wait for the index.
func (c *Cache) live() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st == stateLive
}

// bounded returns the context for one engine call the cache makes on its own.
func (c *Cache) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}

// boundedList is bounded for a call whose cost grows with the images (ListTimeout).
func (c *Cache) boundedList(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.ListTimeout)
}

// Run fills the index and keeps it current until ctx ends, re-establishing the event
// stream (and resyncing) whenever it breaks.
func (c *Cache) Run(ctx context.Context) {
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	for ctx.Err() == nil {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("image event stream ended")
		}
		c.setState(stateFallback, err.Error())
		c.log.WithError(err).Warn("image cache: event stream lost; answering from the engine until it is back")
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.cfg.RetryInterval):
		}
		c.mu.Lock()
		c.reconnects++
		c.mu.Unlock()
	}
}

// session subscribes, fills the index, then applies events until the stream breaks.
func (c *Cache) session(ctx context.Context) error {
	pctx, pcancel := c.bounded(ctx)
	err := c.Ping(pctx)
	pcancel()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer func() { cancel(); background.Wait() }()
	events, errs := c.ImageEvents(sctx, time.Now().Add(-c.cfg.EventReplay))
	c.prefetchFsUsage(ctx) // beside the fill: the first ImageFsInfo need not wait for the engine
	if err := c.resync(sctx); err != nil {
		return err
	}
	c.setState(stateLive, "")

	ticker := time.NewTicker(c.cfg.ResyncInterval)
	defer ticker.Stop()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	running := make(chan struct{}, 1) // at most one background resync
	resyncInBackground := func() {
		select {
		case running <- struct{}{}:
		default:
			settle.Reset(c.cfg.SettleDelay) // one is under way: go again after it
			return
		}
		background.Go(func() {
			defer func() { <-running }()
			if err := c.resync(sctx); err != nil && sctx.Err() == nil {
				c.log.WithError(err).Warn("image cache: background resync failed; the next one will retry")
			}
		})
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				select {
				case err := <-errs:
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err := c.apply(sctx, ev); err != nil {
				return err
			}
			settle.Reset(c.cfg.SettleDelay)
		case err := <-errs:
			return fmt.Errorf("image event stream: %w", err)
		case <-settle.C:
			resyncInBackground()
		case <-ticker.C:
			resyncInBackground()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// resync replaces the index with the engine's full list, within ListTimeout, keeping
// what events applied while it was taken changed (see index).
func (c *Cache) resync(ctx context.Context) error {
	start := c.idx.begin()
	defer c.idx.end(start)
	ctx, cancel := c.boundedList(ctx)
	defer cancel()
	imgs, err := c.Client.ListImages(ctx)
	if err != nil {
		return fmt.Errorf("listing the engine's images: %w", err)
	}
	if !c.idx.replace(imgs, start) {
		c.log.Debug("image cache: a newer list was installed while this one was taken; dropped")
		return nil
	}
	c.mu.Lock()
	c.lastResync = time.Now()
	c.resyncs++
	c.mu.Unlock()
	c.log.WithField("images", len(imgs)).Debug("image cache: resynced with the engine")
	return nil
}

// apply refreshes what an event names, within CallTimeout.
func (c *Cache) apply(ctx context.Context, ev docker.ImageEvent) error {
	c.mu.Lock()
	c.events++
	c.mu.Unlock()
	c.imagesChanged()
	if ev.Action == "prune" {
		return c.resync(ctx)
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	start := c.idx.begin() // its inspects' answers lose to removals later reads saw
	defer c.idx.end(start)
	if _, err := c.refresh(ctx, ev.ID, true, write{event: true, start: start}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("refreshing image %s after its %s event: %w", ev.ID, ev.Action, err)
	}
	return nil
}

// CacheInfo is the cache's state for verbose Status.
func (c *Cache) CacheInfo() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	info := map[string]any{
		"enabled":     true,
		"state":       c.st.String(),
		"images":      c.idx.len(),
		"resyncs":     c.resyncs,
		"events":      c.events,
		"reconnects":  c.reconnects,
		"resyncEvery": c.cfg.ResyncInterval.String(),
	}
	if !c.lastResync.IsZero() {
		info["lastResync"] = c.lastResync.UTC().Format(time.RFC3339Nano)
	}
	if c.reason != "" {
		info["fallbackReason"] = c.reason
	}
	c.fs.mu.Lock()
	if !c.fs.at.IsZero() {
		info["diskUsageAt"] = c.fs.at.UTC().Format(time.RFC3339Nano)
	}
	info["diskUsageRefreshes"] = c.fs.refreshes
	c.fs.mu.Unlock()
	return info
}
