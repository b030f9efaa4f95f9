package preload

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockpin/cri-dockerd/internal/imageref"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// A line longer than bufio.Scanner's default token (64 KiB) is one bad line: the lines
// after it still pin (they were dropped, and the list only logged: fail-open).
func TestPreloadListLongLineKeepsTheLinesAfterIt(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "images.txt"), "app:1\n"+strings.Repeat("x", 100<<10)+"\ndb:2\n")
	d := newTestDir(t, dir, t.TempDir(), newPreloadEngine())
	d.settleAndLoad()
	assert.DeepEqual(t, d.preloadPins(t, "app:1", "db:2"), []string{"images.txt: app:1", "images.txt: db:2"})
	assert.Check(t, is.Contains(d.view(t, "images.txt").Failed, "line 2: invalid image reference"))
}

// A list too large is refused from its size, before anything is read: a misnamed
// multi-GB file must not be read into memory (a sparse file here: 64 MiB).
func TestPreloadListTooLargeIsNotRead(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.txt"))
	assert.NilError(t, err)
	assert.NilError(t, f.Truncate(64<<20))
	assert.NilError(t, f.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := newTestDir(t, dir, t.TempDir(), newPreloadEngine())
	d.settleAndLoad()
	runtime.ReadMemStats(&after)
	assert.Check(t, is.Contains(d.view(t, "big.txt").Failed, "larger than"))
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Check(t, allocated < 16<<20, "reading a refused list allocated %d bytes", allocated)
}

// A list with many references, each several times: deduplication is linear (it was
// quadratic: 80k references took seconds).
func TestParseListDeduplicates(t *testing.T) {
	var b strings.Builder
	for i := range 30000 {
		b.WriteString("registry.local/app:" + string(rune('a'+i%26)) + "\n")
	}
	refs, err := parseList([]byte(b.String()))
	assert.NilError(t, err)
	assert.Equal(t, len(refs), 26)
}

func BenchmarkParseList(b *testing.B) {
	var sb strings.Builder
	for i := range 40000 {
		sb.WriteString("registry.local/app:v" + strings.Repeat("1", 1+i%5) + "-" + strconv.Itoa(i) + "\n")
	}
	list := []byte(sb.String())
	for b.Loop() {
		if _, err := parseList(list); err != nil {
			b.Fatal(err)
		}
	}
}

// A load that fails (a full disk) is tried again with backoff, without the file being
// touched, until it loads; the retry is visible meanwhile.
func TestPreloadFailedLoadIsRetried(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	engine.failLoad = []error{errors.New("write /var/lib/docker/tmp: no space left on device"), errors.New("no space left on device")}
	d := newTestDir(t, dir, t.TempDir(), engine)
	d.settleAndLoad()
	a := d.view(t, "a.tar")
	assert.Check(t, a.State == pinner.PreloadFailed && a.LoadFailures == 1 && a.RetryAt != "", "%+v", a)

	d.scan() // not due yet: nothing is tried
	assert.Check(t, !d.processNext())
	d.clock.Advance(d.reload.after(1))
	d.scan()
	assert.Check(t, d.processNext())
	a = d.view(t, "a.tar")
	assert.Check(t, a.State == pinner.PreloadFailed && a.LoadFailures == 2, "%+v", a)

	d.clock.Advance(d.reload.after(2))
	d.scan()
	for d.processNext() {
	}
	a = d.view(t, "a.tar")
	assert.Check(t, a.State == pinner.PreloadLoaded && a.LoadFailures == 0 && a.RetryAt == "", "%+v", a)
	assert.DeepEqual(t, engine.loaded(), []string{"archive-a"})
	assert.Check(t, d.nextRetry().IsZero())
}

func TestLoadBackoff(t *testing.T) {
	b := pullBackoff{initial: 10 * time.Second, max: time.Minute}
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, b.after(n))
	}
	assert.DeepEqual(t, got, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute})
}

// An archive replaced by a FIFO after the scan saw a regular file: the loader refuses
// it at once instead of blocking in open(2) with its lock held (until a writer came).
func TestPreloadFIFOSwappedInDoesNotStall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.tar")
	writeFile(t, path, "archive-a")
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	d := newTestDir(t, dir, t.TempDir(), engine)
	d.clock.Advance(d.settle)
	d.scan() // settled: queued
	assert.NilError(t, os.Remove(path))
	assert.NilError(t, syscall.Mkfifo(path, 0o600))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d.processNext() {
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang detector, not a timing: the fix answers at once
		t.Fatal("the loader is stuck opening a FIFO")
	}
	a := d.view(t, "a.tar")
	assert.Check(t, a.State == pinner.PreloadFailed && strings.Contains(a.Failed, "not a regular file"), "%+v", a)
}

// A symbolic link in the preload directory is ignored with a warning, once (it was
// ignored silently: replacing a file by a link unpinned its images without a word).
func TestPreloadSymlinkIsReported(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.tar"), "archive-a")
	assert.NilError(t, os.Symlink("a.tar", filepath.Join(dir, "b.tar")))
	engine := newPreloadEngine()
	engine.archives["archive-a"] = []string{"a:1"}
	d := newTestDir(t, dir, t.TempDir(), engine)
	d.settleAndLoad()
	d.scan()
	var warned int
	for _, e := range d.hook.AllEntries() {
		if e.Data["file"] == "b.tar" && strings.Contains(e.Message, "not a regular file") {
			warned++
		}
	}
	assert.Equal(t, warned, 1)
	assert.Check(t, is.Len(d.p.PreloadedNow(), 1))
}

// BenchmarkPreloadList10000Present: a first start with a list of 10,000 images the
// engine has: read, pinned, each image checked and found present, everything
// published at each change (issue 28: 1,000 lines took 4 s, 4,000 took 61 s).
func BenchmarkPreloadList10000Present(b *testing.B) {
	var sb strings.Builder
	engine := newPreloadEngine()
	for i := range benchListSize {
		ref := "registry.local/team/app-" + strconv.Itoa(i) + ":v1"
		sb.WriteString(ref + "\n")
		engine.images[imageref.Key(ref)] = true
	}
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		assert.NilError(b, os.WriteFile(filepath.Join(dir, "images.txt"), []byte(sb.String()), 0o600))
		d := newTestDir(b, dir, b.TempDir(), engine)
		b.StartTimer()
		d.settleAndLoad()
		for d.view(b, "images.txt").State != pinner.PreloadLoaded {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		d.Close()
		b.StartTimer()
	}
}

// benchListSize is the length of BenchmarkPreloadList10000Present's list.
const benchListSize = 10000

// BenchmarkArchiveRefs80k: the references of an archive whose manifest names 80,000
// tags (issue 28: deduplicating them was quadratic, 6.4 s).
func BenchmarkArchiveRefs80k(b *testing.B) {
	tags := make([]string, 80000)
	for i := range tags {
		tags[i] = "registry.local/team/app:v" + strconv.Itoa(i)
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "c.json", "RepoTags": tags, "Layers": []string{}}})
	assert.NilError(b, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	assert.NilError(b, tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest))}))
	_, err = tw.Write(manifest)
	assert.NilError(b, err)
	assert.NilError(b, tw.Close())
	path := filepath.Join(b.TempDir(), "many.tar")
	assert.NilError(b, os.WriteFile(path, buf.Bytes(), 0o600))
	for b.Loop() {
		refs, err := archiveRefs(path)
		if err != nil || len(refs) != len(tags) {
			b.Fatal(len(refs), err)
		}
	}
}
