package pinning

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
)

func TestPinsDirFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.pins", "a", ".hidden", "old~", "x.dpkg-old", "y.rpmnew", "z.swp", "w.ucf-dist"} {
		writePins(t, filepath.Join(dir, n), "busybox")
	}
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	// A ConfigMap volume: each key is a link into ..data.
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "..data"), 0o700))
	writePins(t, filepath.Join(dir, "..data", "c"), "nginx")
	assert.NilError(t, os.Symlink("..data/c", filepath.Join(dir, "c")))
	assert.NilError(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))

	names, err := pinsDirFiles(dir)
	assert.NilError(t, err)
	assert.DeepEqual(t, names, []string{"a", "b.pins", "c"})

	names, err = pinsDirFiles(filepath.Join(dir, "missing"))
	assert.NilError(t, err)
	assert.Check(t, is.Len(names, 0))
}

func pinsDirPinner(t *testing.T) (*Pinner, string, string) {
	t.Helper()
	root := t.TempDir()
	file, dir := filepath.Join(root, "pins"), filepath.Join(root, "pins.d")
	assert.NilError(t, os.Mkdir(dir, 0o700))
	writePins(t, file, "busybox")
	writePins(t, filepath.Join(dir, "10-k8s"), "registry.k8s.io/*")
	cfg := emptyConfig()
	cfg.PinsFile, cfg.PinsDir = file, dir
	p, _, _ := newTestPinner(t, cfg)
	return p, file, dir
}

func TestPinsDirLoadsAfterTheFile(t *testing.T) {
	p, _, dir := pinsDirPinner(t)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*"})

	writePins(t, filepath.Join(dir, "20-app"), "*pause*")
	assert.NilError(t, p.Reload())
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*", "*pause*"})
	files, _ := p.Info()["pinsFile"].(map[string]any)["files"].([]string)
	assert.Check(t, is.Len(files, 3))
}

func TestPinsDirBadFileKeepsOldSet(t *testing.T) {
	p, _, dir := pinsDirPinner(t)
	writePins(t, filepath.Join(dir, "20-bad"), "busybox", "UPPER/Case:tag")
	err := p.Reload()
	assert.ErrorContains(t, err, "20-bad")
	assert.ErrorContains(t, err, "line 2")
	// Both files' old patterns stay in force.
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*"})
}

func TestPinsDirMissingPinsNothing(t *testing.T) {
	cfg := emptyConfig()
	cfg.PinsDir = filepath.Join(t.TempDir(), "absent")
	p, _, _ := newTestPinner(t, cfg)
	assert.Check(t, is.Len(fileReasons(t, p, busyboxImg), 0)) // Evaluate answers: nothing to refuse
}

func TestPinsFileTooLargeIsNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	assert.NilError(t, err)
	assert.NilError(t, f.Truncate(maxPinsFileBytes+1)) // sparse: nothing to read if it were
	assert.NilError(t, f.Close())
	_, err = loadPinsFile(path)
	assert.ErrorContains(t, err, "more than the")
}

func TestPinsFileLongLineFailsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	writePins(t, path, "busybox", strings.Repeat("a", 100<<10), "nginx")
	_, err := loadPinsFile(path)
	assert.ErrorContains(t, err, "line 2") // a bad line, not a silently dropped rest of the file
}

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
	writePins(t, filepath.Join(cfg.PinsDir, "app"), "busybox")
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
	w.check()
	assert.Equal(t, r.count(), 0)
	writePins(t, filepath.Join(dir, "a"), "busybox")
	w.check()
	w.check()
	assert.Equal(t, r.count(), 1)
	writePins(t, filepath.Join(dir, ".hidden"), "nginx") // not a pins file
	w.check()
	assert.Equal(t, r.count(), 1)
}

// A state saved by a version without pins directories (no "dir") still answers for the
// pins file after an upgrade that reads the default pins directory too; a state saved
// for another directory does not.
func TestPinsFileSavedBeforePinsDirs(t *testing.T) {
	cfg := emptyConfig()
	cfg.StateDir = t.TempDir()
	cfg.PinsFile = filepath.Join(t.TempDir(), "pins")
	writePins(t, cfg.PinsFile, "BAD:") // a bad file at the first start of the new version
	saved := `{"path":"` + cfg.PinsFile + `","patterns":["busybox:1.36"],"loadedAt":"2026-11-01T00:00:00Z"}`
	assert.NilError(t, os.WriteFile(filepath.Join(cfg.StateDir, pinsFileStateName+".json"), []byte(saved), 0o600))
	upgraded := cfg
	upgraded.PinsDir = filepath.Join(t.TempDir(), "pins.d")
	p, _, _ := newTestPinner(t, upgraded)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox:1.36"})

	saved = `{"path":"` + cfg.PinsFile + `","dir":"/elsewhere","patterns":["busybox:1.36"],"loadedAt":"2026-11-01T00:00:00Z"}`
	assert.NilError(t, os.WriteFile(filepath.Join(cfg.StateDir, pinsFileStateName+".json"), []byte(saved), 0o600))
	p2, _, _ := newTestPinner(t, upgraded)
	_, err := p2.Evaluate(t.Context(), []Image{busyboxImg})
	assert.Check(t, err != nil, "another directory's saved patterns are not these")
}
