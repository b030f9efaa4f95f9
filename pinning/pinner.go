package pinning

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Image is the view of one engine image that pinning decisions look at.
type Image struct {
	// ID is the engine image ID, "sha256:<hex>".
	ID string
	// RepoTags are the tags as Docker reports them, in familiar form ("busybox:1.36");
	// "<none>:<none>" entries are ignored.
	RepoTags []string
	// RepoDigests are the digests as Docker reports them ("busybox@sha256:...");
	// "<none>@<none>" entries are ignored.
	RepoDigests []string
	// Labels are the image config labels (Config.Labels).
	Labels map[string]string
}

// Reason says why an image is pinned.
type Reason struct {
	// Source is one of the Source* constants.
	Source string `json:"source"`
	// Detail is what matched: the pattern, "label k=v", the record name, ...
	Detail string `json:"detail"`
}

// Reason sources, in the order reasons are reported.
const (
	// SourceSandboxImage pins the pod infra image.
	SourceSandboxImage = "sandbox-image"
	// SourceConfigLabel pins images whose config labels carry PinnedLabel=PinnedValue.
	SourceConfigLabel = "config-label"
	// SourcePattern pins images matching --pinned-images.
	SourcePattern = "pinned-images"
	// SourcePinsFile pins images matching a pattern of --pinned-images-file.
	SourcePinsFile = "pinned-images-file"
	// SourceLabelSelector pins images whose config labels match --pinned-image-labels.
	SourceLabelSelector = "pinned-image-labels"
	// SourceContainerd pins images whose containerd records carry the pinned label.
	SourceContainerd = "containerd-label"
	// SourcePreload pins the images loaded from the preload directory at this start.
	SourcePreload = "preload"
)

const (
	// PinnedLabel is the label that pins an image (containerd's name).
	PinnedLabel = "io.cri-containerd.pinned"
	// PinnedValue is the only value of PinnedLabel that pins.
	PinnedValue = "pinned"
	// MisspelledLabel is a frequent misspelling of PinnedLabel; it does not pin.
	MisspelledLabel = "io.cri.containerd.pinned"
)

// Pinner decides whether images are pinned and why. It is safe for concurrent use.
type Pinner struct {
	cfg   Config
	log   logrus.FieldLogger
	store stateStore // Config.StateDir
	now   func() time.Time
	rules *rules
	refs  *refCache
	warns *warnLimiter

	reloadMu   sync.Mutex // serialises pins file loads
	set        atomic.Pointer[matchSet]
	fileStatus atomic.Pointer[pinsFileStatus]

	sourcesMu sync.Mutex // serialises AddSource
	sources   atomic.Pointer[[]*sourceState]

	lastEval atomic.Pointer[evalStats]

	preloaded    atomic.Pointer[[]Preloaded] // what the preload files pin now, for Info and Health
	preloadBlock atomic.Pointer[[]string]    // preload files present at start whose pins are not known yet
	// preloadParsed are the patterns of the preload files' references, parsed once
	// (setPreloaded; guarded by reloadMu).
	preloadParsed map[preloadKey]Pattern
	preloadOrder  []preloadKey // the references in force, in order
}

// New validates cfg, loads the pins file (see startFile: a bad one does not fail
// New) and registers sources. A nil log discards messages.
func New(cfg Config, log logrus.FieldLogger, sources ...Source) (*Pinner, error) {
	return newPinner(cfg, log, false, sources...)
}

// newPinner is New; with watchedPreload the preload directory's watcher (Start) owns
// the preload pins and their saved state, so cfg.Preloaded is not resolved here.
func newPinner(cfg Config, log logrus.FieldLogger, watchedPreload bool, sources ...Source) (*Pinner, error) {
	log = logctx.OrDiscard(log)
	store := stateStore{dir: cfg.StateDir}
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
		refs:  newRefCache(maxCachedRefs),
		warns: newWarnLimiter(cfg.WarnInterval, maxWarnedImages),
	}
	p.set.Store(newMatchSet(r, nil, r.preload))
	preloaded := cfg.Preloaded
	p.preloaded.Store(&preloaded)
	if cfg.hasPinsFiles() {
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
func (p *Pinner) Evaluate(ctx context.Context, imgs []Image) ([][]Reason, error) {
	out, now, err := p.decideAll(ctx, imgs)
	if err != nil {
		return nil, err
	}
	p.lastEval.Store(newEvalStats(now, out))
	return out, nil
}

// decideQuietly is Evaluate without its bookkeeping (the last evaluation Info shows
// is kubelet's ListImages, not the sticky keepers').
func (p *Pinner) decideQuietly(ctx context.Context, imgs []Image) ([][]Reason, error) {
	out, _, err := p.decideAll(ctx, imgs)
	return out, err
}

// decideAll decides for imgs with fresh snapshots, refusing as Evaluate does, and
// returns when it decided.
func (p *Pinner) decideAll(ctx context.Context, imgs []Image) ([][]Reason, time.Time, error) {
	matchers, err := p.matchers(ctx, true)
	if err != nil {
		return nil, time.Time{}, err
	}
	e := p.newEvaluation(ctx, matchers)
	if err := p.fileErr(e.set); err != nil {
		return nil, time.Time{}, err
	}
	if err := p.preloadErr(); err != nil {
		return nil, time.Time{}, err
	}
	out := make([][]Reason, len(imgs))
	for i := range imgs {
		out[i] = e.decide(&imgs[i])
	}
	return out, e.now, nil
}

// Check decides for one image (ImageStatus). It may reuse a Source snapshot tried
// less than SnapshotTTL ago. It never fails: a source without usable state adds no
// reason (ImageStatus serves pulls and container starts, which must go on).
func (p *Pinner) Check(ctx context.Context, img Image) []Reason {
	matchers, _ := p.matchers(ctx, false) // the sources without state are nil and logged
	return p.newEvaluation(ctx, matchers).decide(&img)
}

// evaluation holds what one Evaluate or Check call decides with.
type evaluation struct {
	p        *Pinner
	log      logrus.FieldLogger // the request's
	now      time.Time
	set      *matchSet
	matchers []Matcher
	refs     []*normRef // scratch: the current image's normalised references
	bits     []uint64   // scratch: the patterns of set matching the current image
	arena    []Reason   // backing store of the returned reason slices
}

func (p *Pinner) newEvaluation(ctx context.Context, matchers []Matcher) *evaluation {
	set := p.set.Load()
	return &evaluation{
		p: p, log: logctx.For(ctx, p.log), now: p.now(), set: set, matchers: matchers, bits: make([]uint64, set.words),
	}
}

// decide returns the deduplicated reasons img is pinned, in the documented order.
func (e *evaluation) decide(img *Image) []Reason {
	e.refs = appendImageRefs(e.p.refs, e.refs[:0], img)
	matched := e.set.match(img.ID, e.refs, e.bits)
	start := len(e.arena)
	if matched {
		e.addPatterns(start, SourceSandboxImage, 0, e.set.sandboxEnd)
	}
	e.decideConfigLabels(start, img)
	if matched {
		e.addPatterns(start, SourcePattern, e.set.sandboxEnd, e.set.patternsEnd)
	}
	e.decideSelectors(start, img)
	if matched {
		e.addPatterns(start, SourcePinsFile, e.set.patternsEnd, e.set.fileEnd)
		e.addPatterns(start, SourcePreload, e.set.fileEnd, len(e.set.patterns))
	}
	for _, m := range e.matchers {
		if m != nil {
			e.add(start, m.Match(img)...)
		}
	}
	if len(e.arena) == start {
		return nil
	}
	return e.arena[start:len(e.arena):len(e.arena)]
}

func (e *evaluation) decideConfigLabels(start int, img *Image) {
	if !e.p.rules.configLabels || len(img.Labels) == 0 {
		return
	}
	if hasPinnedLabel(img.Labels) {
		e.add(start, Reason{Source: SourceConfigLabel, Detail: configLabelDetail})
	}
	warnNearMisses(e.log, e.p.warns, img, e.now)
}

func (e *evaluation) decideSelectors(start int, img *Image) {
	if len(img.Labels) == 0 {
		return
	}
	sels := e.p.rules.selectors
	for i := range sels {
		if sels[i].matches(img.Labels) {
			e.add(start, Reason{Source: SourceLabelSelector, Detail: sels[i].detail})
		}
	}
}

// addPatterns adds a reason for every matched pattern in set.patterns[lo:hi].
func (e *evaluation) addPatterns(start int, source string, lo, hi int) {
	for i := lo; i < hi; i++ {
		if hasBit(e.bits, i) {
			e.add(start, Reason{Source: source, Detail: e.set.patterns[i].text})
		}
	}
}

// add appends reasons not yet given for the current image (whose reasons start at start).
// Slices returned earlier keep the old backing array when the arena grows, so they stay valid.
func (e *evaluation) add(start int, reasons ...Reason) {
	for _, r := range reasons {
		if !containsReason(e.arena[start:], r) {
			e.arena = append(e.arena, r)
		}
	}
}

func containsReason(rs []Reason, r Reason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
