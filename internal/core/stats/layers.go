package stats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Layer is the measured use of a container's writable layer.
type Layer struct {
	// Bytes is the space its files take (allocated blocks, as du counts them) and
	// Inodes the number of its files, directories and links (each inode once).
	Bytes, Inodes uint64
	// Time is when the measurement finished: a reader sees how old it is.
	Time time.Time
}

// Layers measures the writable layers of running containers in the background, as
// containerd's snapshot syncer and cadvisor's fs handler do: a stats request never
// walks a layer; it gets the last measurement (with its time) and asks for the
// container to be measured. Each container asked for within the last three periods is
// measured once per period, one layer at a time; after each walk the walker rests
// three times as long as the walk took, so at most a quarter of a core goes to it
// however many files the layers hold. Containers no longer asked for are forgotten.
//
// The writable layer is found from the container's root mount, which the engine makes
// overlay on both image stores: the upperdir in /proc/<pid>/mountinfo. When it is
// relative (the overlay2 driver shortens long mount options) or the root is not
// overlay, the directory the engine reported (its inspect's GraphDriver UpperDir) is
// used; a container with neither has no measurement.
type Layers struct {
	root   string
	period time.Duration
	log    logrus.FieldLogger
	wake   chan struct{}

	mu       sync.Mutex
	wanted   map[string]*layerWant
	measured map[string]Layer
}

type layerWant struct {
	pid    int
	hint   string    // the engine's UpperDir
	dir    string    // the layer found, "" until found
	asked  time.Time // when a request last asked for it
	failed time.Time // when finding or walking it last failed
}

// NewLayers returns a walker reading <root>/proc and the layers below root ("/" on a
// node; a fake tree in tests), measuring each layer once per period.
func NewLayers(root string, period time.Duration, log logrus.FieldLogger) *Layers {
	return &Layers{
		root: root, period: period, log: log, wake: make(chan struct{}, 1),
		wanted: map[string]*layerWant{}, measured: map[string]Layer{},
	}
}

// Get returns the last measurement of container id's writable layer, if any, and asks
// for it to be measured: pid is its init process, upperDir what the engine reports
// of it ("" when it does not say).
func (l *Layers) Get(id string, pid int, upperDir string, now time.Time) (Layer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.wanted[id]
	if w == nil || w.pid != pid {
		w = &layerWant{pid: pid, hint: upperDir}
		l.wanted[id] = w
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	w.asked = now
	m, ok := l.measured[id]
	return m, ok
}

// Last returns the last measurement of container id's writable layer, if any.
func (l *Layers) Last(id string) (Layer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.measured[id]
	return m, ok
}

// Run measures the layers asked for until ctx ends.
func (l *Layers) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.wake:
		}
		for {
			id, w, ok := l.next(time.Now())
			if !ok {
				break
			}
			took := l.measure(id, w)
			if !sleep(ctx, 3*took) {
				return
			}
		}
		timer.Reset(l.period / 4)
	}
}

// next forgets what is no longer asked for and returns a layer due for a measurement.
func (l *Layers) next(now time.Time) (string, layerWant, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, w := range l.wanted {
		if now.Sub(w.asked) > 30*l.period {
			delete(l.wanted, id)
			delete(l.measured, id)
		}
	}
	for id, w := range l.wanted {
		m, ok := l.measured[id]
		if ok && now.Sub(m.Time) < l.period || now.Sub(w.failed) < l.period {
			continue
		}
		return id, *w, true
	}
	return "", layerWant{}, false
}

// measure walks container id's layer, records the result and returns how long it took.
func (l *Layers) measure(id string, w layerWant) time.Duration {
	start := time.Now()
	dir := w.dir
	_, err := os.Stat(filepath.Join(l.root, "proc", strconv.Itoa(w.pid)))
	if err == nil && dir == "" {
		dir, err = l.upperDir(w.pid, w.hint)
	}
	var m Layer
	if err == nil {
		m, err = DirUsage(filepath.Join(l.root, dir))
	}
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.wanted[id]
	if cur == nil || cur.pid != w.pid {
		return took // forgotten or restarted meanwhile
	}
	if errors.Is(err, fs.ErrNotExist) {
		delete(l.wanted, id) // its process or layer is gone: asked for anew if it comes back
		delete(l.measured, id)
		return took
	}
	if err != nil {
		cur.failed = time.Now()
		delete(l.measured, id)
		l.log.WithError(err).WithField("container", id).Debug("cannot measure the writable layer")
		return took
	}
	cur.dir = dir
	l.measured[id] = m
	return took
}

// upperDir returns the writable layer of the container whose init process is pid:
// the upperdir of its root mount, else hint when absolute.
func (l *Layers) upperDir(pid int, hint string) (string, error) {
	b, err := os.ReadFile(filepath.Join(l.root, "proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		return "", fmt.Errorf("read the mounts of process %d: %w", pid, err)
	}
	if dir := rootUpperDir(string(b)); filepath.IsAbs(dir) {
		return dir, nil
	}
	if filepath.IsAbs(hint) {
		return hint, nil
	}
	return "", fmt.Errorf("process %d: its root is not an overlay mount with an absolute upperdir, and the engine names no writable layer", pid)
}

// rootUpperDir returns the upperdir option of the overlay mounted at "/" in a
// mountinfo file's content (the last such mount: the one on top), "" when none.
func rootUpperDir(mountinfo string) string {
	var dir string
	for line := range strings.Lines(mountinfo) {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[4] != "/" || g[0] != "overlay" {
			continue
		}
		for _, opt := range strings.Split(g[2], ",") {
			if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
				dir = unescapeOctal(v)
			}
		}
	}
	return dir
}

// unescapeOctal undoes the kernel's \ooo escapes of spaces, tabs, newlines, commas
// and backslashes in mountinfo fields.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// DirUsage measures the files below dir as du does: allocated blocks and inodes, each
// hard-linked inode once. Files removed during the walk are skipped.
func DirUsage(dir string) (Layer, error) {
	var m Layer
	seen := map[uint64]struct{}{}
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			if errors.Is(err, unix.ENOENT) && path != dir {
				return nil
			}
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if _, dup := seen[st.Ino]; dup {
				return nil
			}
			seen[st.Ino] = struct{}{}
		}
		m.Inodes++
		m.Bytes += uint64(st.Blocks) * 512
		return nil
	})
	if err != nil {
		return Layer{}, fmt.Errorf("measure %s: %w", dir, err)
	}
	m.Time = time.Now()
	return m, nil
}

// sleep waits d or until ctx ends; false when it ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
