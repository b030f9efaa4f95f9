package preload

import (
	"time"

	"github.com/fsnotify/fsnotify"
)

// watch scans the directory whenever inotify reports a change in it, every
// preloadResync besides, and, while a file is not settled yet, again once the settle
// time has passed. Without inotify (or when the directory cannot be watched: it does
// not exist yet, say) it polls every preloadPoll.
func (d *Dir) watch() {
	var events <-chan fsnotify.Event
	var errs <-chan error
	idle := preloadPoll
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(d.dir); err == nil {
			events, errs, idle = w.Events, w.Errors, preloadResync
		}
		defer w.Close()
	}
	d.mu.Lock()
	d.watching = "inotify"
	if events == nil {
		d.watching = "poll"
		d.log.WithError(err).WithField("interval", idle.String()).Info("preload: cannot watch the directory with inotify; polling it")
	}
	d.mu.Unlock()
	d.scan() // what changed between start's scan and the watch
	for {
		interval := idle
		if d.unsettled() {
			interval = min(interval, d.settle)
		}
		if next := d.nextRetry(); !next.IsZero() {
			interval = max(min(interval, next.Sub(d.now())), preloadDebounce)
		}
		t := time.NewTimer(interval)
		select {
		case <-d.bg.Done():
			t.Stop()
			return
		case <-events:
			d.quiet(events) // a copy in progress sends an event per write: scan once it pauses
		case err := <-errs:
			d.log.WithError(err).Warn("preload: inotify error; scanning the directory")
		case <-t.C:
		}
		t.Stop()
		d.scan()
	}
}

// unsettled tells whether a file changed since it was last processed.
func (d *Dir) unsettled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.files {
		if f.seen != f.done {
			return true
		}
	}
	return false
}

// preloadDebounce is how long the watcher waits for a burst of inotify events to end
// before it scans.
const preloadDebounce = 100 * time.Millisecond

// quiet drains events until none came for preloadDebounce, for at most the settle
// time (a long copy must not hold back the scan of other files), or close.
func (d *Dir) quiet(events <-chan fsnotify.Event) {
	t := time.NewTimer(preloadDebounce)
	defer t.Stop()
	limit := time.NewTimer(d.settle)
	defer limit.Stop()
	for {
		select {
		case <-d.bg.Done():
			return
		case <-limit.C:
			return
		case <-events:
			if !t.Stop() {
				<-t.C
			}
			t.Reset(preloadDebounce)
		case <-t.C:
			return
		}
	}
}
