//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"gotest.tools/v3/assert"
)

// bundle is a k3s-style air-gap bundle: one `docker save` of many images, compressed
// with zstd, in a preload directory of its own.
type bundle struct {
	dir     string
	ids     []string // the images it holds
	present []string // those the engine keeps (the others are loaded from it)
	bytes   int64    // the .tar.zst's size
}

// makeBundle saves images of mbEach MiB (random, so incompressible) making about
// totalMB MiB into dir/bundle.tar.zst, dated an hour back (copied in before the start);
// every other image is removed from the engine, the rest stays (present at a first
// start, as on a node whose state directory is new). Every image is removed when the
// test ends.
func makeBundle(t testing.TB, totalMB, mbEach int) bundle {
	t.Helper()
	b := bundle{dir: t.TempDir()}
	n := max(1, totalMB/mbEach)
	var tags []string
	for i := range n {
		tag := fmt.Sprintf("e2e/bundle-%03d:1", i)
		_, err := dockerErr(bigRootfsTar(t, mbEach<<20), "import", "-", tag)
		assert.NilError(t, err)
		id := imageID(t, tag)
		removeAtEnd(t, id)
		b.ids, tags = append(b.ids, id), append(tags, tag)
	}
	tarball := filepath.Join(t.TempDir(), "bundle.tar")
	docker(t, append([]string{"save", "-o", tarball}, tags...)...)
	path := filepath.Join(b.dir, "bundle.tar.zst")
	b.bytes = zstdFile(t, tarball, path)
	assert.NilError(t, os.Remove(tarball))
	old := time.Now().Add(-time.Hour)
	assert.NilError(t, os.Chtimes(path, old, old))
	for i, tag := range tags {
		if i%2 == 0 {
			b.present = append(b.present, b.ids[i])
		} else {
			docker(t, "rmi", tag)
		}
	}
	return b
}

// zstdFile compresses src into dst as zstd(1) does by default and returns dst's size.
func zstdFile(t testing.TB, src, dst string) int64 {
	t.Helper()
	in, err := os.Open(src)
	assert.NilError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	assert.NilError(t, err)
	defer out.Close()
	zw, err := zstd.NewWriter(out)
	assert.NilError(t, err)
	_, err = io.Copy(zw, in)
	assert.NilError(t, err)
	assert.NilError(t, zw.Close())
	st, err := out.Stat()
	assert.NilError(t, err)
	return st.Size()
}

// firstStart is what a first start over a bundle showed, times from the launch.
type firstStart struct {
	samples, refused, unsafe int
	firstUnsafe              string
	serve                    time.Duration // the socket answers Version
	answer                   time.Duration // the first ListImages answered
	known                    time.Duration // an image no pin names is listed unpinned: the bundle is read
	leased                   time.Duration // the keeper leases the known pin (containerd store; 0: not seen)
	allPinned                time.Duration // every bundle image listed pinned, the bundle loaded
	refusedFor               time.Duration // from the first refusal to the last
	peakRSSMiB               float64
}

func (f firstStart) String() string {
	return fmt.Sprintf("serve %.2fs, first ListImages answer %.2fs, bundle read (other image unpinned) %.2fs, known pin leased %.2fs, "+
		"all pinned and loaded %.2fs; %d ListImages samples, %d refused (for %.2fs), %d unsafe; peak RSS %.1f MiB",
		f.serve.Seconds(), f.answer.Seconds(), f.known.Seconds(), f.leased.Seconds(), f.allPinned.Seconds(),
		f.samples, f.refused, f.refusedFor.Seconds(), f.unsafe, f.peakRSSMiB)
}

// startOverBundle launches our binary (a new root directory: a first start) over the
// bundle's directory with a known pin (a pattern naming the image known) and samples
// ListImages every 100 ms on a new connection, as a kubelet starting beside it would,
// until the bundle is loaded and every image of it is listed pinned. An unsafe answer
// lists a bundle image unpinned; other is an image nothing pins.
func startOverBundle(t testing.TB, b bundle, known, other string) firstStart {
	t.Helper()
	start := time.Now()
	s := launchBinary(t, env.binary, "", "--preload-images-dir", b.dir, "--pinned-images", known, "--log-level", "info")
	var r firstStart
	var firstRefused, lastRefused time.Time
	deadline := start.Add(30 * time.Minute)
	for ; ; time.Sleep(100 * time.Millisecond) {
		assert.Assert(t, time.Now().Before(deadline), "bundle not loaded after 30 minutes: %s", r)
		assert.Assert(t, s.cmd.ProcessState == nil, "cri-dockerd exited")
		if r.serve == 0 {
			if !freshServes(s.endpoint) {
				continue
			}
			r.serve = time.Since(start)
		}
		got, err := listPinnedFresh(s.endpoint)
		at := time.Now()
		r.samples++
		if err != nil {
			r.refused++
			if firstRefused.IsZero() {
				firstRefused = at
				t.Logf("ListImages refused at %.2fs: %v", at.Sub(start).Seconds(), err)
			}
			lastRefused = at
			continue
		}
		if r.answer == 0 {
			r.answer = at.Sub(start)
		}
		all := true
		for _, id := range b.ids {
			pinned, listed := got[id]
			if listed && !pinned {
				r.unsafe++
				if r.firstUnsafe == "" {
					r.firstUnsafe = fmt.Sprintf("%s listed unpinned at %.2fs", id, at.Sub(start).Seconds())
				}
			}
			all = all && pinned
		}
		if r.known == 0 && !got[other] {
			r.known = at.Sub(start)
		}
		st := bundleStatus(t, s)
		if r.leased == 0 && st.Sticky.State.PinnedImages > 0 {
			r.leased = time.Since(start)
		}
		if all && r.known > 0 && st.file("bundle.tar.zst").State == "loaded" {
			r.allPinned = time.Since(start)
			break
		}
	}
	if !firstRefused.IsZero() {
		r.refusedFor = lastRefused.Sub(firstRefused)
	}
	r.peakRSSMiB = float64(procStatusKiB(t, s.cmd.Process.Pid, "VmHWM:")) / 1024
	s.stop(t)
	return r
}

// bundleState is what verbose Status says of the preload directory and the lease.
type bundleState struct {
	preloadStatus
	Unread []string `json:"preloadUnread"`
	Sticky struct {
		State struct {
			PinnedImages int `json:"pinnedImages"`
		} `json:"state"`
	} `json:"sticky"`
}

func bundleStatus(t testing.TB, s *shim) bundleState {
	t.Helper()
	var out bundleState
	s.pinningInfo(t, &out)
	return out
}

// procStatusKiB reads a kB field (VmRSS:, VmHWM:) of /proc/<pid>/status.
func procStatusKiB(t testing.TB, pid int, field string) int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	assert.NilError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.Atoi(f[1])
			assert.NilError(t, err)
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestPreloadFirstStartBundle: a first start (nothing saved) over a k3s-style
// .tar.zst bundle of many images (E2E_BUNDLE_MB, default 256 MiB), half of them in the
// engine already: ListImages, sampled every 100 ms from the launch, is never refused
// and never lists a bundle image unpinned; the bundle is read before its load (an
// image nothing pins is listed unpinned once it is), the known pin is leased (on the
// containerd store) and in the end every image is loaded and pinned. The figures are
// logged; `make bench-preload` measures the same at 5 GiB.
func TestPreloadFirstStartBundle(t *testing.T) {
	b := makeBundle(t, envInt("E2E_BUNDLE_MB", 256), 32)
	known, other := importImage(t, "e2e/bundle-known:1"), importImage(t, "e2e/bundle-other:1")
	r := startOverBundle(t, b, "e2e/bundle-known:1", other)
	t.Logf("first start over a %d MiB .tar.zst bundle of %d images (%d present): %s",
		b.bytes>>20, len(b.ids), len(b.present), r)
	assert.Check(t, r.unsafe == 0, "a bundle image was listed unpinned: %s", r.firstUnsafe)
	assert.Check(t, r.refused == 0, "ListImages was refused %d times", r.refused)
	assert.Check(t, r.known > 0)
	if env.store == "containerd" {
		assert.Check(t, r.leased > 0, "the known pin %s was not leased", known)
	}
}

// BenchmarkPreloadFirstStartBundleE2E is TestPreloadFirstStartBundle at the size of
// real air-gap bundles: BENCH_BUNDLE_MB (default 5120) MiB of 256 MiB images in one
// .tar.zst. Run: hack/bench-preload.sh.
func BenchmarkPreloadFirstStartBundleE2E(b *testing.B) {
	bun := makeBundle(b, envInt("BENCH_BUNDLE_MB", 5120), 256)
	importImage(b, "e2e/bundle-known:1")
	other := importImage(b, "e2e/bundle-other:1")
	var last firstStart
	for i := range b.N {
		if i > 0 { // the next start must be a first one again, with the same half present
			for j, id := range bun.ids {
				if j%2 == 1 {
					docker(b, "rmi", "-f", id)
				}
			}
		}
		last = startOverBundle(b, bun, "e2e/bundle-known:1", other)
		b.Logf("%d MiB .tar.zst, %d images: %s", bun.bytes>>20, len(bun.ids), last)
		if last.unsafe > 0 {
			b.Fatalf("unsafe answer: %s", last.firstUnsafe)
		}
	}
	b.ReportMetric(last.serve.Seconds(), "s-to-serve")
	b.ReportMetric(last.answer.Seconds(), "s-to-answer")
	b.ReportMetric(last.known.Seconds(), "s-to-read")
	b.ReportMetric(last.leased.Seconds(), "s-to-lease")
	b.ReportMetric(last.allPinned.Seconds(), "s-to-all-pinned")
	b.ReportMetric(float64(last.refused), "refused")
	b.ReportMetric(last.peakRSSMiB, "MiB-peak-rss")
	b.ReportMetric(0, "ns/op")
}
