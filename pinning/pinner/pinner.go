package pinner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// Pinner decides whether images are pinned and why. It is safe for concurrent use.
type Pinner struct {
	cfg   Config
	log   logrus.FieldLogger
	store statefile.Store // Config.StateDir
	now   func() time.Time
	rules *rules
	refs  *pin.RefCache
	warns *pin.WarnLimiter

	reloadMu   sync.Mutex // serialises pins file loads
	set        atomic.Pointer[matchSet]
	fileStatus atomic.Pointer[pinsFileStatus]

	sourcesMu sync.Mutex // serialises AddSource
	sources   atomic.Pointer[[]*sourceState]

	lastEval atomic.Pointer[evalStats]

	preloaded     atomic.Pointer[[]Preloaded] // what the preload files pin now, for Info and Health
	preloadUnread atomic.Pointer[[]string]    // preload files present at start whose pins are not known yet
	// preloadParsed are the patterns of the preload files' references, parsed once
	// (SetPreloaded; guarded by reloadMu).
	preloadParsed map[preloadKey]pin.Pattern
	preloadOrder  []preloadKey // the references in force, in order
	// preloadHooks are called after what the preload files pin changed (guarded by
	// reloadMu): the keepers lease at once what a manifest read or a load pinned.
	preloadHooks []func()
}

// New validates cfg, loads the pins file (see startFile: a bad one does not fail
// New) and registers sources. A nil log discards messages.
func New(cfg Config, log logrus.FieldLogger, sources ...pin.Source) (*Pinner, error) {
	return newPinner(cfg, log, false, sources...)
}

// NewWatched is New for a host whose preload directory watcher (preload.Dir) owns
// the preload pins and their saved state: cfg.Preloaded is not resolved from it.
func NewWatched(cfg Config, log logrus.FieldLogger, sources ...pin.Source) (*Pinner, error) {
	return newPinner(cfg, log, true, sources...)
}

// newPinner is New, or NewWatched with watchedPreload.
func newPinner(cfg Config, log logrus.FieldLogger, watchedPreload bool, sources ...pin.Source) (*Pinner, error) {
	log = logctx.OrDiscard(log)
	store := statefile.Store{Dir: cfg.StateDir}
	if !watchedPreload {
		cfg.Preloaded = resolvePreloaded(store, cfg.Preloaded, log)
	}
	r, err := compileRules(cfg)
	if err != nil {
		return nil, err
	}
	p := &Pinner{
		cfg:   cfg,
		log:   log,
		store: store,
		now:   time.Now,
		rules: r,
		refs:  pin.NewRefCache(pin.MaxCachedRefs),
		warns: pin.NewWarnLimiter(cfg.WarnInterval, pin.MaxWarnedImages),
	}
	p.set.Store(newMatchSet(r, nil, r.preload))
	preloaded := cfg.Preloaded
	p.preloaded.Store(&preloaded)
	if cfg.HasPinsFiles() {
		p.startFile()
	}
	for _, s := range sources {
		p.AddSource(s)
	}
	return p, nil
}

// Evaluate decides for a whole list: result[i] are the reasons for imgs[i] (nil =
// not pinned). It takes one fresh snapshot per Source. A failing Source is logged and
// its last good snapshot used, from memory or from the state directory (within
// MaxStaleness). When a Source has no such state, Evaluate returns no result and an
// error wrapping ErrNoPinState and errdefs' Unavailable that names it: a list without
// that source's pins would show pinned images unpinned to kubelet's image GC.
//
// While preload files present at start are unread, every image is pinned (see
// SetPreloadUnread).
func (p *Pinner) Evaluate(ctx context.Context, imgs []pin.Image) ([][]pin.Reason, error) {
	out, now, err := p.decideAll(ctx, imgs, true)
	if err != nil {
		return nil, err
	}
	p.lastEval.Store(newEvalStats(now, out))
	return out, nil
}

// Decide is Evaluate without its bookkeeping (the last evaluation Info shows
// is kubelet's ListImages, not the sticky keepers') and with only the pins known:
// preload files not read yet pin nothing here (the keepers check PreloadUnread).
func (p *Pinner) Decide(ctx context.Context, imgs []pin.Image) ([][]pin.Reason, error) {
	out, _, err := p.decideAll(ctx, imgs, false)
	return out, err
}

// decideAll decides for imgs with fresh snapshots, refusing as Evaluate does, and
// returns when it decided; overPin adds the reason of unread preload files.
func (p *Pinner) decideAll(ctx context.Context, imgs []pin.Image, overPin bool) ([][]pin.Reason, time.Time, error) {
	matchers, err := p.matchers(ctx, true)
	if err != nil {
		return nil, time.Time{}, err
	}
	e := p.newEvaluation(ctx, matchers)
	if err := p.fileErr(e.set); err != nil {
		return nil, time.Time{}, err
	}
	if overPin {
		e.unread = p.PreloadUnread()
	}
	out := make([][]pin.Reason, len(imgs))
	for i := range imgs {
		out[i] = e.decide(&imgs[i])
	}
	return out, e.now, nil
}

// Check decides for one image (ImageStatus). It may reuse a Source snapshot tried
// less than SnapshotTTL ago. It never fails: a source without usable state adds no
// reason (ImageStatus serves pulls and container starts, which must go on).
func (p *Pinner) Check(ctx context.Context, img pin.Image) []pin.Reason {
	matchers, _ := p.matchers(ctx, false) // the sources without state are nil and logged
	e := p.newEvaluation(ctx, matchers)
	e.unread = p.PreloadUnread()
	return e.decide(&img)
}

// evaluation holds what one Evaluate or Check call decides with.
type evaluation struct {
	p        *Pinner
	log      logrus.FieldLogger // the request's
	now      time.Time
	set      *matchSet
	matchers []pin.Matcher
	unread   []string       // preload files present at start not read yet: every image is pinned
	refs     []*pin.NormRef // scratch: the current image's normalised references
	bits     []uint64       // scratch: the patterns of set matching the current image
	arena    []pin.Reason   // backing store of the returned reason slices
}

func (p *Pinner) newEvaluation(ctx context.Context, matchers []pin.Matcher) *evaluation {
	set := p.set.Load()
	return &evaluation{
		p: p, log: logctx.For(ctx, p.log), now: p.now(), set: set, matchers: matchers, bits: make([]uint64, set.Words()),
	}
}

// decide returns the deduplicated reasons img is pinned, in the documented order.
func (e *evaluation) decide(img *pin.Image) []pin.Reason {
	e.refs = pin.AppendImageRefs(e.p.refs, e.refs[:0], img)
	matched := e.set.Match(img.ID, e.refs, e.bits)
	start := len(e.arena)
	if matched {
		e.addPatterns(start, pin.SourceSandboxImage, groupSandbox)
	}
	e.decideConfigLabels(start, img)
	if matched {
		e.addPatterns(start, pin.SourcePattern, groupPatterns)
	}
	e.decideSelectors(start, img)
	if matched {
		e.addPatterns(start, pin.SourcePinsFile, groupFile)
		e.addPatterns(start, pin.SourcePreload, groupPreload)
	}
	for _, m := range e.matchers {
		if m != nil {
			e.add(start, m.Match(img)...)
		}
	}
	if len(e.unread) > 0 {
		e.add(start, unreadReason(e.unread))
	}
	if len(e.arena) == start {
		return nil
	}
	return e.arena[start:len(e.arena):len(e.arena)]
}

func (e *evaluation) decideConfigLabels(start int, img *pin.Image) {
	if !e.p.rules.configLabels || len(img.Labels) == 0 {
		return
	}
	if pin.HasPinnedLabel(img.Labels) {
		e.add(start, pin.Reason{Source: pin.SourceConfigLabel, Detail: pin.ConfigLabelDetail})
	}
	pin.WarnNearMisses(e.log, e.p.warns, img, e.now)
}

func (e *evaluation) decideSelectors(start int, img *pin.Image) {
	if len(img.Labels) == 0 {
		return
	}
	sels := e.p.rules.selectors
	for i := range sels {
		if sels[i].Matches(img.Labels) {
			e.add(start, pin.Reason{Source: pin.SourceLabelSelector, Detail: sels[i].Detail()})
		}
	}
}

// addPatterns adds a reason for every matched pattern of the set's group g.
func (e *evaluation) addPatterns(start int, source string, g int) {
	lo, hi := e.set.Group(g)
	for i := lo; i < hi; i++ {
		if pin.HasBit(e.bits, i) {
			e.add(start, pin.Reason{Source: source, Detail: e.set.Pattern(i).String()})
		}
	}
}

// add appends reasons not yet given for the current image (whose reasons start at start).
// Slices returned earlier keep the old backing array when the arena grows, so they stay valid.
func (e *evaluation) add(start int, reasons ...pin.Reason) {
	for _, r := range reasons {
		if !containsReason(e.arena[start:], r) {
			e.arena = append(e.arena, r)
		}
	}
}

func containsReason(rs []pin.Reason, r pin.Reason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// StateStore is where the Pinner keeps its state (Config.StateDir), for the keepers
// of its pins to keep theirs beside it.
func (p *Pinner) StateStore() statefile.Store { return p.store }
