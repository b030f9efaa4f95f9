package pinning

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
)

// Pins file watching: a pins file and a pins directory are re-read when they change,
// so that configuration management, a DaemonSet or `echo >>` applies without a
// SIGHUP. inotify watches the pins directory, the pins file's directory (an editor or
// a tool replaces a file by renaming) and the pins directory's parent (to see the
// directory appear); a check every pinsPoll besides covers file systems without
// inotify and a watch that could not be set. A change is a new fingerprint of the
// files (names, sizes, modification times, inodes): only then is Reload called, so a
// bad file is reported once per change, and the previous pins stay in force. A new
// fingerprint is applied only once it held for pinsDebounce: a file caught between
// its truncation and its write (`echo >`, os.WriteFile) is not loaded as empty, which
// would have made the empty state the "previous pins" a bad file falls back to.

// pinsPoll is how often the watcher checks the pins files' fingerprint.
const pinsPoll = 5 * time.Second

// pinsDebounce is how long the watcher waits for a burst of events to end.
const pinsDebounce = 200 * time.Millisecond

// pinsWatcher re-reads the pins files of a Pinner when their fingerprint changes.
type pinsWatcher struct {
	file, dir string
	poll      time.Duration
	reload    func(why string)
	log       logrus.FieldLogger
	settle    time.Duration // how long a new fingerprint must hold before a reload
	last      string        // the fingerprint of the files at the last reload
}

// newPinsWatcher returns the watcher of cfg's pins files, which takes their
// fingerprint now: call it before they are first loaded, so that a change made while
// they load is seen. reload is called (from the watcher's goroutine) after each change.
func newPinsWatcher(cfg *Config, poll time.Duration, reload func(why string), log logrus.FieldLogger) *pinsWatcher {
	w := &pinsWatcher{file: cfg.PinsFile, dir: cfg.PinsDir, poll: poll, reload: reload, log: log, settle: pinsDebounce}
	w.last = w.fingerprint()
	return w
}

// start starts the watch; it ends with ctx, and done is closed then.
func (w *pinsWatcher) start(ctx context.Context) (done <-chan struct{}) {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		w.run(ctx)
	}()
	return finished
}

// run is the watch loop.
func (w *pinsWatcher) run(ctx context.Context) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	iw, err := fsnotify.NewWatcher()
	if err != nil {
		w.log.WithError(err).WithField("interval", w.poll.String()).Info("pins files: no inotify; checking them periodically")
	} else {
		defer func() { _ = iw.Close() }()
		events, errs = iw.Events, iw.Errors
	}
	watched := map[string]bool{}
	for {
		if iw != nil {
			w.addWatches(iw, watched)
		}
		w.check(ctx)
		t := time.NewTimer(w.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case ev := <-events:
			if w.relevant(ev.Name) {
				w.quiet(ctx, events)
			}
		case err := <-errs:
			w.log.WithError(err).Warn("pins files: inotify error; checking them")
		case <-t.C:
		}
		t.Stop()
	}
}

// addWatches watches the directories that exist among the pins directory, its parent
// and the pins file's directory; a watch lost (the directory removed) is set again
// when the directory is back.
func (w *pinsWatcher) addWatches(iw *fsnotify.Watcher, watched map[string]bool) {
	var dirs []string
	if w.dir != "" {
		dirs = append(dirs, w.dir, filepath.Dir(w.dir))
	}
	if w.file != "" {
		dirs = append(dirs, filepath.Dir(w.file))
	}
	current := map[string]bool{}
	for _, p := range iw.WatchList() {
		current[p] = true
	}
	for _, d := range dirs {
		if current[d] {
			continue
		}
		if err := iw.Add(d); err == nil {
			watched[d] = true
		} else if watched[d] || !os.IsNotExist(err) {
			w.log.WithError(err).WithField("dir", d).Debug("pins files: cannot watch a directory; checking it periodically")
		}
	}
}

// relevant tells whether an event's path is one of the pins files, the pins directory
// or inside it (events of the file's neighbours are not).
func (w *pinsWatcher) relevant(name string) bool {
	if w.file != "" && name == w.file {
		return true
	}
	return w.dir != "" && (name == w.dir || strings.HasPrefix(name, w.dir+string(filepath.Separator)))
}

// quiet drains events until none came for pinsDebounce, or ctx ends.
func (w *pinsWatcher) quiet(ctx context.Context, events <-chan fsnotify.Event) {
	t := time.NewTimer(pinsDebounce)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			t.Reset(pinsDebounce)
		case <-t.C:
			return
		}
	}
}

// check reloads when the fingerprint differs from the last reload's and then held for
// settle (it waits while the files keep changing, or until ctx ends).
func (w *pinsWatcher) check(ctx context.Context) {
	fp := w.fingerprint()
	for fp != w.last {
		t := time.NewTimer(w.settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		again := w.fingerprint()
		if again == fp {
			w.last = fp
			w.reload("pins files changed")
			return
		}
		fp = again
	}
}

// fingerprint identifies the current pins files: each file's name, size,
// modification time and inode, or its absence.
func (w *pinsWatcher) fingerprint() string {
	var b strings.Builder
	if w.file != "" {
		fingerprintFile(&b, w.file)
	}
	if w.dir != "" {
		names, err := pin.PinsDirFiles(w.dir)
		if err != nil {
			fmt.Fprintf(&b, "dir error %v\n", err)
		}
		for _, n := range names {
			fingerprintFile(&b, filepath.Join(w.dir, n))
		}
	}
	return b.String()
}

// fingerprintFile writes one file's line of a fingerprint.
func fingerprintFile(b *strings.Builder, path string) {
	st, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(b, "%s: %v\n", path, err)
		return
	}
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	fmt.Fprintf(b, "%s %d %d %d\n", path, st.Size(), st.ModTime().UnixNano(), ino)
}
