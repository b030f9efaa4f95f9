package stats

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Mount tables as a container's process sees them: the containerd image store's
// snapshot (absolute paths), the overlay2 driver with long options (relative paths),
// a path with a space, and a root that is not overlay.
const (
	mountinfoSnapshotter = `1421 1322 0:112 / / rw,relatime master:600 - overlay overlay rw,lowerdir=/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/12/fs,upperdir=/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/31/fs,workdir=/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/31/work,uuid=on
1422 1421 0:115 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
`
	mountinfoRelative = `900 800 0:90 / / rw,relatime - overlay overlay rw,lowerdir=l/A:l/B:l/C,upperdir=5f2c/diff,workdir=5f2c/work
`
	mountinfoEscaped = `900 800 0:90 / / rw,relatime - overlay overlay rw,lowerdir=/x,upperdir=/data\040root/up\054per,workdir=/w
`
	mountinfoBtrfs = `900 800 0:90 /subvol / rw,relatime - btrfs /dev/sda2 rw,subvol=/subvol
`
)

func TestRootUpperDir(t *testing.T) {
	for name, tc := range map[string]struct{ mountinfo, want string }{
		"snapshotter":   {mountinfoSnapshotter, "/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/31/fs"},
		"relative":      {mountinfoRelative, "5f2c/diff"},
		"escaped":       {mountinfoEscaped, "/data root/up,per"},
		"not overlay":   {mountinfoBtrfs, ""},
		"empty":         {"", ""},
		"garbage":       {"a b c\n - \n\x00", ""},
		"truncated esc": {`1 2 0:1 / / rw - overlay o rw,upperdir=/a\04`, `/a\04`},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Check(t, is.Equal(rootUpperDir(tc.mountinfo), tc.want))
		})
	}
}

func TestDirUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, n int) {
		t.Helper()
		p := filepath.Join(dir, rel)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, make([]byte, n), 0o644))
	}
	write("a", 100_000)
	write("sub/b", 10)
	assert.NilError(t, os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub/a-link")))
	assert.NilError(t, os.Symlink("a", filepath.Join(dir, "sym")))
	m, err := DirUsage(dir)
	assert.NilError(t, err)
	// dir, a, sub, sub/b, sym: the hard link is the same inode as a.
	assert.Check(t, is.Equal(m.Inodes, uint64(5)))
	assert.Check(t, m.Bytes >= 100_000 && m.Bytes < 200_000, "a counted once: %d", m.Bytes)

	_, err = DirUsage(filepath.Join(dir, "missing"))
	assert.Check(t, is.ErrorContains(err, "missing"))
}

// layerHost is a fake root: containers' mount tables under proc/ and their layers.
type layerHost struct{ root string }

func (h layerHost) container(t *testing.T, pid int, mountinfo string) {
	t.Helper()
	p := filepath.Join(h.root, "proc", strconv.Itoa(pid), "mountinfo")
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(mountinfo), 0o644))
}

func (h layerHost) file(t *testing.T, rel string, n int) {
	t.Helper()
	p := filepath.Join(h.root, rel)
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, make([]byte, n), 0o644))
}

func overlayRoot(upper string) string {
	return "900 800 0:90 / / rw,relatime - overlay overlay rw,lowerdir=/low,upperdir=" + upper + ",workdir=/work\n"
}

func TestLayersMeasureInBackground(t *testing.T) {
	h := layerHost{root: t.TempDir()}
	h.container(t, 10, overlayRoot("/snap/1/fs"))
	h.file(t, "snap/1/fs/etc/written", 5000)
	h.container(t, 20, mountinfoRelative) // overlay2 with long options: the engine's UpperDir
	h.file(t, "overlay2/5f2c/diff/tmp/x", 10)
	h.container(t, 30, mountinfoBtrfs)

	const period = 50 * time.Millisecond
	l := NewLayers(h.root, period, logctx.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	_, ok := l.Get("c1", 10, "", time.Now())
	assert.Check(t, !ok, "nothing measured yet: a request never walks")
	measured := func(id string, pid int, hint string, inodes uint64) poll.Check {
		return func(poll.LogT) poll.Result {
			m, ok := l.Get(id, pid, hint, time.Now())
			if !ok || m.Inodes != inodes {
				return poll.Continue("%s: %v %+v", id, ok, m)
			}
			return poll.Success()
		}
	}
	poll.WaitOn(t, measured("c1", 10, "", 3)) // fs, etc, written
	m, _ := l.Get("c1", 10, "", time.Now())
	assert.Check(t, m.Bytes >= 5000 && !m.Time.IsZero() && time.Since(m.Time) < time.Minute, "%+v", m)

	poll.WaitOn(t, measured("c2", 20, "/overlay2/5f2c/diff", 3)) // diff, tmp, x

	// No overlay, no name from the engine: never measured, asked again each period.
	l.Get("c3", 30, "", time.Now())
	time.Sleep(3 * period)
	_, ok = l.Get("c3", 30, "", time.Now())
	assert.Check(t, !ok)

	// Written to since: the next period's measurement sees it.
	h.file(t, "snap/1/fs/etc/more", 10)
	poll.WaitOn(t, measured("c1", 10, "", 4))

	// Restarted (a new process, and here a new layer): measured anew.
	h.container(t, 11, overlayRoot("/snap/2/fs"))
	h.file(t, "snap/2/fs/a", 1)
	poll.WaitOn(t, measured("c1", 11, "", 2))

	// Not asked for 30 periods: forgotten.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.measured["c2"]; ok {
			return poll.Continue("c2 still remembered")
		}
		return poll.Success()
	})

}

func TestLayersForgetGoneProcess(t *testing.T) {
	h := layerHost{root: t.TempDir()}
	h.container(t, 10, overlayRoot("/snap/1/fs"))
	h.file(t, "snap/1/fs/a", 1)
	l := NewLayers(h.root, time.Hour, logctx.Discard())
	l.Get("c1", 10, "", time.Now())
	id, w, ok := l.next(time.Now())
	assert.Assert(t, ok && id == "c1")
	l.measure(id, w)
	m, ok := l.Get("c1", 10, "", time.Now())
	assert.Check(t, ok && m.Inodes == 2, "%+v", m)
	_, _, ok = l.next(time.Now())
	assert.Check(t, !ok, "measured this period")

	// The container stopped: its process is gone, its layer is still there.
	assert.NilError(t, os.RemoveAll(filepath.Join(h.root, "proc", "10")))
	l.measure("c1", l.wantOf(t, "c1"))
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Check(t, is.Len(l.wanted, 0))
	assert.Check(t, is.Len(l.measured, 0))
}

func (l *Layers) wantOf(t *testing.T, id string) layerWant {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.wanted[id]
	assert.Assert(t, ok)
	return *w
}

// BenchmarkDirUsage measures a writable layer of 1,000 files in 10 directories, as
// the background walker does once per period per container.
func BenchmarkDirUsage(b *testing.B) {
	dir := b.TempDir()
	for d := range 10 {
		sub := filepath.Join(dir, strconv.Itoa(d))
		assert.NilError(b, os.MkdirAll(sub, 0o755))
		for f := range 100 {
			assert.NilError(b, os.WriteFile(filepath.Join(sub, strconv.Itoa(f)), []byte("x"), 0o644))
		}
	}
	for b.Loop() {
		m, err := DirUsage(dir)
		assert.NilError(b, err)
		assert.Equal(b, m.Inodes, uint64(1011))
	}
}
