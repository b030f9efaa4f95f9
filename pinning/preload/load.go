package preload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
	"github.com/pierrec/lz4/v4"
)

// preloadSuffixes are the archive names loaded from the preload directory (the engine
// detects the compression itself, lz4 but: that one is decompressed here).
var preloadSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tar.lz4"}

// preloadTimeout bounds the load of one tarball.
const preloadTimeout = 30 * time.Minute

// defaultLoadBackoff retries a failed archive load after 10s, 20s, ... then every 5 min.
var defaultLoadBackoff = pullBackoff{initial: 10 * time.Second, max: 5 * time.Minute}

// after is the delay before retry number n (1: the first) of the schedule.
func (b pullBackoff) after(n int) time.Duration {
	d := b.initial
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// loader processes the queued archives one after the other until close.
func (d *Dir) loader() {
	for {
		select {
		case <-d.bg.Done():
			return
		case <-d.work:
		}
		for d.bg.Err() == nil && d.processNext() {
		}
	}
}

// processNext processes the first queued archive; it reports whether there was one.
// The manifests of queued archives whose content is not known are read first, so
// that what they pin is known before the first (maybe long) load.
func (d *Dir) processNext() bool {
	d.readQueuedManifests()
	d.mu.Lock()
	if len(d.queue) == 0 {
		d.mu.Unlock()
		return false
	}
	name := d.queue[0]
	d.queue = d.queue[1:]
	f := d.files[name]
	var sig fileSig
	var rec preloadRecord
	if f != nil {
		sig, rec = f.done, f.rec
	}
	d.mu.Unlock()
	if f != nil {
		d.processArchive(name, sig, rec)
	}
	return true
}

// processArchive brings one archive version (sig) into force: when its content
// digest is the one recorded at its last load and the engine still has every image
// it loaded then, nothing is loaded; else its manifest's references are pinned while
// it loads, then what the engine loaded.
func (d *Dir) processArchive(name string, sig fileSig, rec preloadRecord) {
	path := filepath.Join(d.dir, name)
	log := d.log.WithField("tarball", name)
	if rec.Digest != "" && d.has != nil {
		digest := rec.Digest
		var err error
		if rec.Sig != sig { // touched or copied again: the content may still be the same
			digest, err = fileDigest(path)
		}
		if err == nil && digest == rec.Digest && d.stillLoaded(rec.Refs) {
			d.update(name, sig, func(f *preloadFile) {
				f.rec.Sig = sig
				f.view = pinner.Preloaded{Tarball: name, Kind: pinner.PreloadArchive, Refs: rec.Refs, Origin: pinner.OriginLoaded,
					State: pinner.PreloadLoaded, Digest: digest, Skipped: true}
				f.refsKnown = true
				d.skips++
			})
			log.WithField("digest", digest).WithField("images", rec.Refs).
				Info("preload: archive already loaded (same content digest, images present): not loaded again")
			return
		}
	}
	d.readManifest(name, sig)
	if _, err := d.loadArchive(d.bg, name, sig); err != nil && d.bg.Err() == nil {
		log.WithError(err).Debug("preload: archive load failed")
	}
}

// readQueuedManifests reads the manifests of the queued archives whose content is
// not known yet, several at once: at a first start every file's references are
// known after the slowest read, not after the sum of them.
func (d *Dir) readQueuedManifests() {
	type job struct {
		name string
		sig  fileSig
	}
	var jobs []job
	d.mu.Lock()
	for _, n := range d.queue {
		if f := d.files[n]; f != nil && !f.refsKnown && f.manifestSig != f.done {
			jobs = append(jobs, job{n, f.done})
		}
	}
	d.mu.Unlock()
	next := make(chan job)
	var wg sync.WaitGroup
	for range min(len(jobs), manifestReaders()) {
		wg.Go(func() {
			for j := range next {
				d.readManifest(j.name, j.sig)
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}

// manifestReaders is how many archives' manifests are read at once: decompression
// is CPU-bound, one per CPU, at least two (a plain tarball's read is mostly waiting).
func manifestReaders() int {
	return max(2, runtime.GOMAXPROCS(0))
}

// readManifest pins, while an archive version waits for its load, the references
// its manifest names (besides those it pinned before), once per version.
func (d *Dir) readManifest(name string, sig fileSig) {
	d.mu.Lock()
	f := d.files[name]
	if f == nil || f.done != sig || f.manifestSig == sig {
		d.mu.Unlock()
		return
	}
	f.manifestSig = sig
	d.mu.Unlock()
	refs, err := archiveRefs(filepath.Join(d.dir, name))
	if err != nil {
		d.log.WithError(err).WithField("tarball", name).Debug("preload: manifest not readable before the load")
		return
	}
	d.update(name, sig, func(f *preloadFile) {
		f.view.Refs, f.view.Origin, f.refsKnown = union(f.view.Refs, refs), pinner.OriginManifest, true
	})
}

// loadArchive loads one archive into the engine and records the outcome on its file
// (when the file is still that version, sig; a zero sig: whatever version it is).
func (d *Dir) loadArchive(ctx context.Context, name string, sig fileSig) ([]string, error) {
	path := filepath.Join(d.dir, name)
	d.loadMu.Lock()
	start := time.Now()
	refs, digest, err := loadArchiveFile(ctx, d.engine, path)
	d.loadMu.Unlock()
	log := d.log.WithField("tarball", name).WithField("duration", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil && err != nil {
		return nil, err // stopping: record nothing
	}
	if err == nil {
		log.WithField("images", refs).Info("preload: loaded and pinned")
		d.update(name, sig, func(f *preloadFile) {
			f.rec = preloadRecord{Tarball: name, Kind: pinner.PreloadArchive, Refs: refs, Digest: digest, Sig: f.done}
			f.view = pinner.Preloaded{Tarball: name, Kind: pinner.PreloadArchive, Refs: refs, Origin: pinner.OriginLoaded, State: pinner.PreloadLoaded,
				Digest: digest, LoadedAt: pin.FormatTime(d.now())}
			f.refsKnown = true
			f.failures, f.retryAt = 0, time.Time{}
			d.loads++
		})
		return refs, nil
	}
	held, merr := archiveRefs(path)
	d.update(name, sig, func(f *preloadFile) {
		f.view.State, f.view.Failed, f.view.Skipped, f.refsKnown = pinner.PreloadFailed, err.Error(), false, true
		f.failures++
		f.retryAt = d.now().Add(d.reload.after(f.failures))
		f.view.LoadFailures, f.view.RetryAt = f.failures, pin.FormatTime(f.retryAt)
		switch {
		case merr == nil:
			f.view.Refs, f.view.Origin = held, pinner.OriginManifest
			log.WithError(err).WithField("images", held).Error("preload: tarball not loaded; the images its manifest names stay pinned")
		case len(f.rec.Refs) > 0:
			f.view.Refs, f.view.Origin = slices.Clone(f.rec.Refs), pinner.OriginSaved
			log.WithError(err).WithField("manifest_error", merr.Error()).WithField("images", f.rec.Refs).
				Error("preload: tarball not loaded and not readable; its images stay pinned as at its last good load")
		default:
			f.view.Refs, f.view.Origin = nil, ""
			log.WithError(err).WithField("manifest_error", merr.Error()).
				Error("preload: tarball not loaded, not readable and never loaded before: it pins nothing")
		}
	})
	return nil, err
}

// update applies change to the file called name when it is still the version sig
// (any version when sig is zero), then publishes.
func (d *Dir) update(name string, sig fileSig, change func(*preloadFile)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.files[name]
	if f == nil || (sig != fileSig{} && f.done != sig) {
		return // removed, or changed since: the newer version is processed on its own
	}
	change(f)
	d.publishLocked()
}

// stillLoaded tells whether the engine has every one of refs.
func (d *Dir) stillLoaded(refs []string) bool {
	if len(refs) == 0 {
		return false
	}
	for _, ref := range refs {
		ctx, cancel := context.WithTimeout(d.bg, time.Minute)
		ok, err := d.has.HasImage(ctx, ref)
		cancel()
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// loadArchiveFile loads the archive at path and returns what the engine loaded and
// the sha256 of the bytes it was given.
func loadArchiveFile(ctx context.Context, engine Loader, path string) ([]string, string, error) {
	f, err := statefile.OpenRegular(path, false)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, preloadTimeout)
	defer cancel()
	h := sha256.New()
	src := bufio.NewReaderSize(io.TeeReader(f, h), 1<<20)
	var archive io.Reader = src
	if magic, _ := src.Peek(len(magicLz4)); bytes.Equal(magic, magicLz4) {
		archive = lz4.NewReader(src) // k3s takes .tar.lz4; the engine does not
	}
	refs, err := engine.LoadImages(ctx, archive)
	if err != nil {
		return nil, "", err
	}
	if len(refs) == 0 {
		return nil, "", fmt.Errorf("the engine loaded no image from %s", filepath.Base(path))
	}
	if _, err := io.Copy(h, f); err != nil { // the engine may stop reading before the end
		return nil, "", err
	}
	return refs, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// fileDigest is the sha256 of the file at path.
func fileDigest(path string) (string, error) {
	f, err := statefile.OpenRegular(path, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// union returns a followed by the elements of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
