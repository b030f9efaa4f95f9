package preload

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/sirupsen/logrus"
)

// Timing of the preload directory's watcher.
const (
	// preloadSettle is how long a new or changed file must stay unchanged (size,
	// modification time and inode), or carry a modification time that old, before it
	// is processed: a file still being copied is never loaded half-way.
	preloadSettle = time.Second
	// preloadResync is the interval of full directory scans while inotify watches it
	// (they catch what an event queue overflow lost).
	preloadResync = 10 * time.Second
	// preloadPoll is the scan interval when inotify cannot watch the directory.
	preloadPoll = 2 * time.Second
)

// Dir keeps the pins of --preload-images-dir current while the process runs:
// it scans the directory (woken by inotify, else polling), loads new or changed
// archives in the background, one at a time, pulls the references of .txt lists with
// retries, drops the pins of removed files, records what each file pinned (and each
// archive's content digest) in the state directory, and lets ImageStatus wait for an
// image a pending file will provide.
type Dir struct {
	dir    string
	engine Loader
	has    ImageChecker // nil: archives are loaded again at each start, listed images always pulled
	puller ImagePuller  // nil: lists pin but are not pulled
	pins   Pins
	store  statefile.Store
	log    logrus.FieldLogger
	now    func() time.Time
	settle time.Duration
	wait   time.Duration // WaitPreloaded's bound; 0: no wait
	retry  pullBackoff   // of list pulls
	reload pullBackoff   // of failed archive loads

	bg     context.Context // the background work's; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	work   chan struct{} // wakes the loader; capacity 1

	loadMu sync.Mutex // one engine load at a time (the loader and ReloadArchiveFor)

	mu        sync.Mutex
	files     map[string]*preloadFile
	saved     map[string]preloadRecord // records of earlier starts, until their file is seen
	queue     []string                 // archives to process, in order
	ignored   map[string]bool          // names of the last scan that are not regular files (logged once)
	listFlush *time.Timer              // a publish of lists' image states due (setListImage)
	changed   chan struct{}            // closed and replaced at every change, for waiters
	lastSaved []byte                   // the records the state file holds
	dirErr    string                   // why the directory could not be read at the last scan
	loads     int                      // archives the engine loaded for this process
	skips     int                      // archives not loaded again: same digest, images present
	watching  string                   // "inotify" or "poll"
	waiting   int                      // ImageStatus calls waiting now
}

// fileSig identifies one version of a file cheaply.
type fileSig struct {
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime"` // Unix nanoseconds
	Inode uint64 `json:"inode"`
}

func sigOf(info os.FileInfo) fileSig {
	s := fileSig{Size: info.Size(), MTime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		s.Inode = st.Ino
	}
	return s
}

// preloadRecord is what the state directory keeps of one preload file (the state
// file "preload"; its tarball and refs fields are those of earlier versions).
type preloadRecord struct {
	Tarball string   `json:"tarball"`
	Refs    []string `json:"refs"`
	Kind    string   `json:"kind,omitempty"`
	// Digest and Sig are those of the archive at its last good load; "" / zero when
	// it never loaded (its Refs are then its manifest's).
	Digest string  `json:"digest,omitempty"`
	Sig    fileSig `json:"sig,omitzero"`
}

// preloadFile is one file of the directory as the watcher knows it.
type preloadFile struct {
	name, kind string
	seen       fileSig   // the latest observation
	seenAt     time.Time // since when seen has not changed
	done       fileSig   // the version processed or queued; zero: none yet
	rec        preloadRecord
	view       pinner.Preloaded // what it pins (Refs) and where it stands, as Info shows it
	refsKnown  bool             // view.Refs are what the file provides; else waiters wait for it
	stopPulls  context.CancelFunc
	images     map[string]*listImage // a list's references
	listErr    string                // a list's bad lines
	// startUnknown: in the directory at start with nothing saved, and not read yet
	// (every image is pinned meanwhile; see Pinner.SetPreloadUnread).
	startUnknown bool
	manifestSig  fileSig // the version whose manifest was read (or tried)
	// failures counts the failed loads of version done in a row; retryAt is when the
	// next is due (zero: none).
	failures int
	retryAt  time.Time
	// listDirty: an image of this list changed state since the list's state was derived.
	listDirty bool
}

// preloadKind is the kind of a file name in the directory; "" for names ignored:
// dotfiles (editors' and rsync's temporaries), *.tmp, *.partial and anything else.
func preloadKind(name string) string {
	switch {
	case strings.HasPrefix(name, "."), strings.HasSuffix(name, ".tmp"), strings.HasSuffix(name, ".partial"):
		return ""
	case strings.HasSuffix(name, ".txt"):
		return pinner.PreloadList
	case slices.ContainsFunc(preloadSuffixes, func(s string) bool { return strings.HasSuffix(name, s) }):
		return pinner.PreloadArchive
	}
	return ""
}

// New returns the preload directory dir, loading through engine and publishing to pins,
// with its records in store; ImageStatus waits up to wait for a pending file. Start it.
func New(dir string, engine Loader, pins Pins, store statefile.Store, wait time.Duration, log logrus.FieldLogger) *Dir {
	d := &Dir{
		dir: dir, engine: engine, pins: pins, store: store, log: log, now: time.Now,
		settle: preloadSettle, wait: wait, retry: defaultPullBackoff, reload: defaultLoadBackoff,
		work: make(chan struct{}, 1), files: map[string]*preloadFile{}, changed: make(chan struct{}),
	}
	d.has, _ = engine.(ImageChecker)
	d.puller, _ = engine.(ImagePuller)
	d.bg, d.cancel = context.WithCancel(context.Background())
	return d
}

// Start reads the records of earlier starts and scans the directory once, so that
// their pins apply before start returns, then starts the watcher and the loader.
func (d *Dir) Start() {
	d.loadSaved()
	d.scan()
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.watch() }()
	go func() { defer d.wg.Done(); d.loader() }()
}

// Close stops the watcher, the loader and the pulls, and waits for them.
func (d *Dir) Close() {
	d.cancel()
	d.wg.Wait()
	d.mu.Lock()
	if d.listFlush != nil && d.listFlush.Stop() {
		d.listFlush = nil
	}
	d.mu.Unlock()
}

func (d *Dir) loadSaved() {
	var saved []preloadRecord
	if _, err := d.store.Load(pinner.PreloadStateName, &saved); err != nil {
		d.log.WithError(err).Warn("preload: cannot read what the files pinned at earlier starts")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.saved = make(map[string]preloadRecord, len(saved))
	for _, r := range saved {
		d.saved[r.Tarball] = r
	}
}

// scan reads the directory: new and changed files are processed once they have not
// changed for the settle time (or at once when they are the version recorded at an
// earlier start), removed files are dropped with their pins. A directory that cannot
// be read changes nothing: the pins in force (at start, those of the saved records)
// stay.
func (d *Dir) scan() {
	entries, err := os.ReadDir(d.dir)
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	if err != nil {
		if d.dirErr != err.Error() {
			d.log.WithError(err).Warn("preload: cannot read the preload directory; the pins in force stay")
			d.dirErr, changed = err.Error(), true
		}
		changed = d.adoptSavedLocked(err.Error()) || changed
		if changed {
			d.publishLocked()
		}
		return
	}
	if d.dirErr != "" {
		d.dirErr, changed = "", true
	}
	present := make(map[string]bool, len(entries))
	ignored := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		kind := preloadKind(name)
		if kind == "" {
			continue
		}
		if !e.Type().IsRegular() {
			ignored[name] = true
			if !d.ignored[name] {
				d.log.WithField("file", name).WithField("type", e.Type().String()).
					Warn("preload: not a regular file (a symbolic link, a directory, a FIFO...): ignored, and nothing it names is pinned")
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		present[name] = true
		changed = d.observeLocked(name, kind, sigOf(info), now) || changed
	}
	d.ignored = ignored
	for name, f := range d.files {
		if !present[name] {
			d.dropLocked(f)
			changed = true
		}
	}
	if d.saved != nil {
		d.saved = nil // records of files not in the directory at the first good scan are dropped
		changed = true
	}
	d.queueDueRetriesLocked(now)
	if changed {
		d.publishLocked()
	}
	if len(d.queue) > 0 {
		select {
		case d.work <- struct{}{}:
		default:
		}
	}
}

// adoptSavedLocked makes the saved records of earlier starts pin while the directory
// cannot be read at start; it reports whether it added any.
func (d *Dir) adoptSavedLocked(reason string) bool {
	added := false
	for name, r := range d.saved {
		if d.files[name] != nil {
			continue
		}
		f := d.newFileLocked(name, r.Kind, fileSig{}, time.Time{})
		f.view.Failed = "preload directory unreadable: " + reason
		added = true
	}
	return added
}

func (d *Dir) newFileLocked(name, kind string, sig fileSig, now time.Time) *preloadFile {
	if kind == "" {
		kind = pinner.PreloadArchive
	}
	f := &preloadFile{name: name, kind: kind, seen: sig, seenAt: now, view: pinner.Preloaded{Tarball: name, Kind: kind, State: pinner.PreloadPending}}
	if r, ok := d.saved[name]; ok {
		f.rec = r
		f.view.Refs, f.view.Origin, f.refsKnown = slices.Clone(r.Refs), pinner.OriginSaved, true
	} else if d.saved != nil {
		f.startUnknown = true // d.saved is cleared at the end of the first good scan
	}
	d.files[name] = f
	return f
}

// observeLocked records one observation of a file; it reports whether the pins or
// the state changed.
func (d *Dir) observeLocked(name, kind string, sig fileSig, now time.Time) bool {
	f := d.files[name]
	if f == nil {
		f = d.newFileLocked(name, kind, sig, now)
		d.log.WithField("file", name).Info("preload: new file; processed once complete")
		if (f.rec.Sig != sig || f.rec.Sig == (fileSig{})) && !d.writtenBefore(sig, now) {
			return true // wait until it stops changing
		}
	} else if f.seen != sig {
		f.seen, f.seenAt = sig, now
		if !d.writtenBefore(sig, now) {
			return false
		}
	}
	if sig == f.done {
		return false
	}
	if now.Sub(f.seenAt) < d.settle && f.rec.Sig != sig && !d.writtenBefore(sig, now) {
		return false // changed within the settle time: maybe still being written
	}
	f.done = sig
	f.failures, f.retryAt = 0, time.Time{}
	f.view.State, f.view.LoadFailures, f.view.RetryAt = pinner.PreloadPending, 0, ""
	switch f.kind {
	case pinner.PreloadList:
		d.readListLocked(f)
	default:
		if !slices.Contains(d.queue, name) {
			d.queue = append(d.queue, name)
		}
	}
	return true
}

// writtenBefore tells whether a file version was last written at least the settle
// time before now, by its modification time: then it is complete whenever it was
// first seen. At a start, files copied in long before are processed at once rather
// than a settle time after the first scan; a file still being written (or copied with
// `cp -p`, which sets the old time only once the data is in) has a recent one.
func (d *Dir) writtenBefore(sig fileSig, now time.Time) bool {
	return sig.MTime != 0 && now.Sub(time.Unix(0, sig.MTime)) >= d.settle
}

// queueDueRetriesLocked queues again the archives whose failed load is due to be
// retried (a full disk freed, the engine back): without it one failure would stand
// until someone touched the file.
func (d *Dir) queueDueRetriesLocked(now time.Time) {
	for name, f := range d.files {
		if f.retryAt.IsZero() || now.Before(f.retryAt) || slices.Contains(d.queue, name) {
			continue
		}
		f.retryAt = time.Time{}
		d.log.WithField("tarball", name).WithField("failures", f.failures).Info("preload: retrying the load that failed")
		d.queue = append(d.queue, name)
	}
}

// nextRetry is when the earliest failed load is due again (zero: none).
func (d *Dir) nextRetry() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	for _, f := range d.files {
		if !f.retryAt.IsZero() && (next.IsZero() || f.retryAt.Before(next)) {
			next = f.retryAt
		}
	}
	return next
}

func (d *Dir) dropLocked(f *preloadFile) {
	if f.stopPulls != nil {
		f.stopPulls()
	}
	delete(d.files, f.name)
	d.queue = slices.DeleteFunc(d.queue, func(n string) bool { return n == f.name })
	d.log.WithField("file", f.name).WithField("images", f.view.Refs).Info("preload: file removed: its images are no longer pinned")
}

// publishLocked puts what the files pin into force, saves the records when they
// changed and wakes the waiters.
func (d *Dir) publishLocked() {
	names := make([]string, 0, len(d.files))
	for n := range d.files {
		names = append(names, n)
	}
	sort.Strings(names)
	views := make([]pinner.Preloaded, 0, len(names))
	records := make([]preloadRecord, 0, len(names))
	for _, n := range names {
		f := d.files[n]
		v := f.view
		v.Refs = slices.Clone(v.Refs)
		if f.kind == pinner.PreloadList {
			v.Images = listImagesView(f)
		}
		views = append(views, v)
		if len(v.Refs) > 0 {
			r := f.rec
			r.Tarball, r.Kind, r.Refs = n, f.kind, v.Refs
			records = append(records, r)
		}
	}
	d.pins.SetPreloaded(views)
	var unread []string
	for _, n := range names {
		f := d.files[n]
		if f.refsKnown {
			f.startUnknown = false
		}
		if f.startUnknown {
			unread = append(unread, n)
		}
	}
	d.pins.SetPreloadUnread(unread)
	d.saveLocked(records)
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *Dir) saveLocked(records []preloadRecord) {
	b, err := json.Marshal(records)
	if err != nil || bytes.Equal(b, d.lastSaved) {
		return
	}
	if err := d.store.Save(pinner.PreloadStateName, records); err != nil {
		d.log.WithError(err).Warn("preload: cannot save what the files pin; a failed load at the next start may unpin them")
		return
	}
	d.lastSaved = b
}

// Info is the directory's part of Info (crictl info's "preloadDir").
func (d *Dir) Info() map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return map[string]any{
		"dir": d.dir, "watching": d.watching, "readError": d.dirErr, "queued": slices.Clone(d.queue),
		"loadedThisStart": d.loads, "skippedThisStart": d.skips, "imageStatusWait": d.wait.String(),
		"imageStatusWaiting": d.waiting,
	}
}
