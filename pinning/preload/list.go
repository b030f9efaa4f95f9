package preload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// pullBackoff is the retry schedule of a list's pulls: initial, doubled after every
// failed round up to max.
type pullBackoff struct {
	initial, max time.Duration
}

// defaultPullBackoff retries a list whose pulls fail after 2s, 4s, ... then every 30s.
var defaultPullBackoff = pullBackoff{initial: 2 * time.Second, max: 30 * time.Second}

// States of a listed reference (Preloaded.Images).
const (
	listPending = "pending"
	listPulling = "pulling"
	listPresent = "present"
)

// listImage is the state of one reference of a list.
type listImage struct {
	state    string
	err      error // the last pull's, while it is failed
	attempts int   // pulls tried
}

// maxListSize bounds what is read of a .txt list.
const maxListSize = 1 << 20

// parseList reads a .txt list: one image reference a line, "#" comments and blank
// lines ignored; a name without tag or digest means ":latest". It returns the good
// references in order (duplicates dropped) and an error naming every bad line. A line
// of any length is read whole (a list is at most maxListSize), so that a bad line never
// hides the lines after it.
func parseList(b []byte) ([]string, error) {
	var refs []string
	var errs []error
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), len(b)+1)
	for line := 1; sc.Scan(); line++ {
		text := pin.StripComment(sc.Text())
		if text == "" {
			continue
		}
		if _, err := pin.ParseExact(text); err != nil {
			if len(text) > 80 {
				text = text[:80] + "..."
			}
			errs = append(errs, fmt.Errorf("line %d: invalid image reference %q: %w", line, text, err))
			continue
		}
		if !seen[text] {
			seen[text] = true
			refs = append(refs, text)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errListUnread, err)
	}
	return refs, errors.Join(errs...)
}

// errListUnread is parseList's error for a list it could not read to its end: what the
// list pinned before stays, as for a list that cannot be opened.
var errListUnread = errors.New("the list could not be read whole")

// readList reads a list file whole, refusing one over maxListSize before reading it.
func readList(path string) ([]byte, error) {
	f, err := statefile.OpenRegular(path, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxListSize {
		return nil, fmt.Errorf("%d bytes, larger than %d", st.Size(), maxListSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxListSize+1))
	if err == nil && len(b) > maxListSize {
		err = fmt.Errorf("larger than %d bytes", maxListSize) // it grew since the stat
	}
	return b, err
}

// readListLocked reads a settled list and pins what it lists at once; its images are
// then pulled in the background. A list that cannot be read keeps the references in
// force (those of its last good read, or saved at an earlier start).
func (d *Dir) readListLocked(f *preloadFile) {
	log := d.log.WithField("list", f.name)
	b, err := readList(filepath.Join(d.dir, f.name))
	var refs []string
	var perr error
	if err == nil {
		refs, perr = parseList(b)
		if errors.Is(perr, errListUnread) {
			err, perr = perr, nil
		}
	}
	if err != nil {
		f.refsKnown = true // what it pins stays what it pinned (nothing, for a new list)
		f.view.Failed = "cannot read the list: " + err.Error()
		log.WithError(err).Error("preload: cannot read the list; the images it listed before stay pinned")
		return
	}
	f.listErr = ""
	if perr != nil {
		f.listErr = perr.Error()
		log.WithError(perr).Error("preload: bad lines in the list are skipped")
	}
	f.view.Refs, f.view.Origin, f.refsKnown = refs, pinner.OriginListed, true
	f.rec = preloadRecord{Tarball: f.name, Kind: pinner.PreloadList, Refs: refs, Sig: f.done}
	old := f.images
	f.images = make(map[string]*listImage, len(refs))
	for _, r := range refs {
		if im, ok := old[r]; ok && im.state == listPresent {
			f.images[r] = im
		} else {
			f.images[r] = &listImage{state: listPending}
		}
	}
	log.WithField("images", refs).Info("preload: listed images pinned; pulling those the engine does not have")
	if f.stopPulls != nil {
		f.stopPulls()
	}
	if d.puller == nil {
		f.listErr = strings.TrimPrefix(f.listErr+"; this host does not pull the images of preload lists", "; ")
		d.listStateLocked(f)
		return
	}
	ctx, cancel := context.WithCancel(d.bg)
	f.stopPulls = cancel
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.pullList(ctx, f.name, f.done, refs) }()
	d.listStateLocked(f)
}

// pullList pulls the references of one list version that the engine lacks, in
// rounds, retrying a failed round with backoff until every one is present or ctx
// ends (the list changed or was removed, or the process stops).
func (d *Dir) pullList(ctx context.Context, name string, sig fileSig, refs []string) {
	delay := d.retry.initial
	for {
		failed := 0
		for _, ref := range refs {
			if ctx.Err() != nil {
				return
			}
			if !d.pullOne(ctx, name, sig, ref) {
				failed++
			}
		}
		if failed == 0 || ctx.Err() != nil {
			return
		}
		d.log.WithField("list", name).WithField("failed", failed).WithField("retry_in", delay.String()).
			Warn("preload: listed images not pulled; retrying")
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, d.retry.max)
	}
}

// pullOne makes sure the engine has ref; it reports whether it does.
func (d *Dir) pullOne(ctx context.Context, name string, sig fileSig, ref string) bool {
	if d.has != nil {
		hctx, cancel := context.WithTimeout(ctx, time.Minute)
		ok, err := d.has.HasImage(hctx, ref)
		cancel()
		if err == nil && ok {
			d.setListImage(name, sig, ref, listPresent, nil, false)
			return true
		}
	}
	d.setListImage(name, sig, ref, listPulling, nil, false)
	start := time.Now()
	err := d.puller.PullImage(ctx, ref)
	if ctx.Err() != nil {
		return false
	}
	log := d.log.WithField("list", name).WithField("image", ref).WithField("duration", time.Since(start).Round(time.Millisecond))
	if err != nil {
		log.WithError(err).Warn("preload: pull of a listed image failed")
		d.setListImage(name, sig, ref, "", err, true)
		return false
	}
	log.Info("preload: listed image pulled")
	d.setListImage(name, sig, ref, listPresent, nil, true)
	return true
}

// listPublishDelay is how long the state changes of a list's images gather before
// they are published together: they change no pin (the list pinned every reference
// when it was read), so publishing each at once would only make a list's pulls cost
// the square of its length.
const listPublishDelay = 50 * time.Millisecond

// setListImage records the state of one reference of a list version; the list's state
// is derived and published within listPublishDelay.
func (d *Dir) setListImage(name string, sig fileSig, ref, state string, err error, attempted bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.files[name]
	if f == nil || (sig != fileSig{} && f.done != sig) {
		return // removed, or changed since
	}
	im := f.images[ref]
	if im == nil {
		return
	}
	im.state, im.err = state, err
	if attempted {
		im.attempts++
	}
	if state == listPresent && attempted {
		f.view.LoadedAt = pin.FormatTime(d.now())
	}
	f.listDirty = true
	if d.listFlush == nil {
		d.listFlush = time.AfterFunc(listPublishDelay, d.flushLists)
	}
}

// flushLists derives the state of the lists whose images changed and publishes.
func (d *Dir) flushLists() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.listFlush = nil
	for _, f := range d.files {
		if f.listDirty {
			f.listDirty = false
			d.listStateLocked(f)
		}
	}
	d.publishLocked()
}

// listStateLocked derives a list's state from its images: loaded when all are
// present, else pending; Failed is the last pull error of each failing image.
func (d *Dir) listStateLocked(f *preloadFile) {
	state := pinner.PreloadLoaded
	var errs []string
	for _, r := range f.view.Refs {
		im := f.images[r]
		if im == nil || im.state != listPresent {
			state = pinner.PreloadPending
		}
		if im != nil && im.err != nil {
			errs = append(errs, r+": "+im.err.Error())
		}
	}
	f.view.State = state
	if f.listErr != "" {
		errs = append([]string{f.listErr}, errs...)
	}
	f.view.Failed = strings.Join(errs, "; ")
}

// listImagesView is Preloaded.Images of a list.
func listImagesView(f *preloadFile) map[string]string {
	if len(f.images) == 0 {
		return nil
	}
	out := make(map[string]string, len(f.images))
	for r, im := range f.images {
		switch {
		case im.err != nil:
			out[r] = "failed: " + im.err.Error()
		default:
			out[r] = im.state
		}
	}
	return out
}
