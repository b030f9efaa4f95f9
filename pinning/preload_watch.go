package pinning

import (
	"time"

	"github.com/fsnotify/fsnotify"
)

// watch scans the directory whenever inotify reports a change in it, every
// preloadResync besides, and, while a file is not settled yet, again once the settle
// time has passed. Without inotify (or when the directory cannot be watched: it does
// not exist yet, say) it polls every preloadPoll.
func (d *preloadDir) watch() {
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
	for {
		interval := idle
		if d.unsettled() {
			interval = min(interval, d.settle)
		}
		t := time.NewTimer(interval)
		select {
		case <-d.bg.Done():
			t.Stop()
			return
		case <-events:
		case err := <-errs:
			d.log.WithError(err).Warn("preload: inotify error; scanning the directory")
		case <-t.C:
		}
		t.Stop()
		d.scan()
	}
}

// unsettled tells whether a file changed since it was last processed.
func (d *preloadDir) unsettled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.files {
		if f.seen != f.done {
			return true
		}
	}
	return false
}
