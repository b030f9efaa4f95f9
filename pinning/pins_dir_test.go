package pinning

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// reloads counts a watcher's reloads.
type reloads struct {
	mu  sync.Mutex
	n   int
	why []string
}

func (r *reloads) reload(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.why = append(r.why, why)
}

func (r *reloads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func startPinsWatcher(t *testing.T, cfg *Config, every time.Duration) *reloads {
	t.Helper()
	r := &reloads{}
	w := newPinsWatcher(cfg, every, r.reload, logrus.New())
	ctx, cancel := context.WithCancel(context.Background())
	done := w.start(ctx)
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func waitReloads(t *testing.T, r *reloads, want int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := r.count(); n < want {
			return poll.Continue("%d reloads, want %d", n, want)
		}
		return poll.Success()
	}, poll.WithTimeout(20*time.Second), poll.WithDelay(20*time.Millisecond))
}

// With no periodic check in reach (an hour), inotify alone sees each change: a file
// added to the directory, a line appended to the pins file, the directory created.
func TestPinsWatcherInotify(t *testing.T) {
	root := t.TempDir()
	cfg := Config{PinsFile: filepath.Join(root, "pins"), PinsDir: filepath.Join(root, "pins.d")}
	r := startPinsWatcher(t, &cfg, time.Hour)

	assert.NilError(t, os.Mkdir(cfg.PinsDir, 0o700)) // an empty directory pins nothing new
	assert.NilError(t, os.WriteFile(filepath.Join(cfg.PinsDir, "app"), []byte("busybox\n"), 0o644))
	waitReloads(t, r, 1)

	f, err := os.OpenFile(cfg.PinsFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	assert.NilError(t, err)
	_, err = f.WriteString("nginx\n")
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
	waitReloads(t, r, 2)

	assert.NilError(t, os.Remove(filepath.Join(cfg.PinsDir, "app")))
	waitReloads(t, r, 3)
}

// The periodic check finds a change that no event announced, and nothing else.
func TestPinsWatcherPeriodicCheck(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{PinsDir: dir}
	w := newPinsWatcher(&cfg, time.Hour, (&reloads{}).reload, logrus.New())
	r := &reloads{}
	w.reload = r.reload
	w.settle = time.Millisecond
	ctx := context.Background()
	w.check(ctx)
	assert.Equal(t, r.count(), 0)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "a"), []byte("busybox\n"), 0o644))
	w.check(ctx)
	w.check(ctx)
	assert.Equal(t, r.count(), 1)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, ".hidden"), []byte("nginx\n"), 0o644)) // not a pins file
	w.check(ctx)
	assert.Equal(t, r.count(), 1)
}

// A check that finds the pins file between its truncation and its write (as
// os.WriteFile and `echo >` leave it for a moment) waits for it to settle: the only
// reload reads the written file, never the empty one a bad file would fall back to.
func TestPinsWatcherWaitsForWriteToSettle(t *testing.T) {
	cfg := Config{PinsFile: filepath.Join(t.TempDir(), "pins")}
	assert.NilError(t, os.WriteFile(cfg.PinsFile, []byte("busybox\n"), 0o644))
	var seen []string
	w := newPinsWatcher(&cfg, time.Hour, func(string) {
		b, err := os.ReadFile(cfg.PinsFile)
		assert.Check(t, err)
		seen = append(seen, string(b))
	}, logrus.New())
	w.settle = 300 * time.Millisecond

	f, err := os.OpenFile(cfg.PinsFile, os.O_WRONLY|os.O_TRUNC, 0)
	assert.NilError(t, err)
	checked := make(chan struct{})
	go func() { defer close(checked); w.check(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // the check has seen the empty file by now
	_, err = f.WriteString("nginx\n")
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
	<-checked
	assert.DeepEqual(t, seen, []string{"nginx\n"})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NilError(t, os.WriteFile(cfg.PinsFile, nil, 0o644))
	w.check(ctx) // a check that ends with its context reloads nothing
	assert.DeepEqual(t, seen, []string{"nginx\n"})
}
