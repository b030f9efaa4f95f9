package pinning

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
)

// pinsFileState is one successfully loaded pins file. It is immutable.
type pinsFileState struct {
	patterns []Pattern
	loadedAt time.Time
	// restored tells that the patterns are the last good ones saved in the state
	// directory, in force because the file could not be loaded at start-up.
	restored bool
}

// savedPinsFile is the state file of the last good pins files.
type savedPinsFile struct {
	Path     string    `json:"path"`
	Dir      string    `json:"dir,omitempty"`
	Patterns []string  `json:"patterns"`
	LoadedAt time.Time `json:"loadedAt"`
}

// pinsFileStateName is the name of the pins file's state file.
const pinsFileStateName = "pins-file"

// maxPinsFileBytes bounds one pins file: a file is checked against it before it is
// read, and a larger one is refused (with the previous pins kept), never read whole.
const maxPinsFileBytes = 8 << 20

// CheckPinsFile validates the pins file at path as Reload would read it, without
// touching a running daemon (cri-dockerd --check-pins-file, ExecReload-style tooling).
// It returns the number of patterns, or an error naming each bad line.
func CheckPinsFile(path string) (int, error) {
	patterns, err := loadPinsFile(path)
	return len(patterns), err
}

// CheckPins validates the pins file (file, "" = none) and the pins directory (dir,
// "" = none) as Reload reads them. It returns the files read and the number of
// patterns, or an error naming each bad file and line.
func CheckPins(file, dir string) (files []string, patterns int, err error) {
	ps, files, err := loadPins(file, dir)
	return files, len(ps), err
}

// pinsFileStatus is the outcome of the most recent load attempt. It is immutable.
type pinsFileStatus struct {
	attemptAt time.Time
	files     []string // the files read (the pins file, then the directory's)
	err       error
}

// loadPins reads the pins file (file, "" = none) and every pins file of the directory
// dir ("" = none; missing = none), in name order: their patterns, one list, and the
// files read. Any bad file fails the whole load, so that the previous pins stay.
func loadPins(file, dir string) ([]Pattern, []string, error) {
	var (
		out   []Pattern
		files []string
		errs  []error
	)
	if file != "" {
		files = append(files, file)
	}
	if dir != "" {
		names, err := pinsDirFiles(dir)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range names {
			files = append(files, filepath.Join(dir, n))
		}
	}
	for _, f := range files {
		ps, err := loadPinsFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ps...)
	}
	if len(errs) > 0 {
		return nil, files, errors.Join(errs...)
	}
	return out, files, nil
}

// pinsDirFiles lists the pins files of dir in name order: every entry whose name does
// not start with "." and is not an editor's or a package manager's leftover, and which
// is a regular file or a link to one (a ConfigMap volume links each key into
// ..data). A directory that does not exist has none.
func pinsDirFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pins directory: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !isPinsFileName(e.Name()) {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing, or a dangling link
			}
			return nil, fmt.Errorf("pins directory: %w", err)
		}
		if st.Mode().IsRegular() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// isPinsFileName tells whether a name in the pins directory is a pins file: not
// hidden, not a backup (~, .bak, .swp) nor a package manager's copy (.dpkg-*,
// .rpmnew, .rpmsave, .rpmorig, .ucf-*).
func isPinsFileName(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
		return false
	}
	ext := filepath.Ext(name)
	switch {
	case ext == ".bak", ext == ".swp", ext == ".rpmnew", ext == ".rpmsave", ext == ".rpmorig",
		strings.HasPrefix(ext, ".dpkg-"), strings.HasPrefix(ext, ".ucf-"):
		return false
	}
	return true
}

// loadPinsFile reads and parses a pins file, refusing one over maxPinsFileBytes before
// reading it.
func loadPinsFile(path string) ([]Pattern, error) {
	f, err := openRegular(path, true)
	if err != nil {
		return nil, fmt.Errorf("read pins file: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read pins file: %w", err)
	}
	if st.Size() > maxPinsFileBytes {
		return nil, fmt.Errorf("pins file %q: %d bytes, more than the %d a pins file may have", path, st.Size(), maxPinsFileBytes)
	}
	return parsePins(path, io.LimitReader(f, maxPinsFileBytes+1))
}

// parsePins parses pins file content: one pattern per line, "#" comments (whole
// line, or after whitespace), blank lines ignored. Any bad line rejects the file.
func parsePins(path string, r io.Reader) ([]Pattern, error) {
	var (
		out  []Pattern
		errs []error
		line int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxPinsFileBytes+1)
	for sc.Scan() {
		line++
		text := stripComment(sc.Text())
		if text == "" {
			continue
		}
		p, err := ParsePattern(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("pins file %q line %d: %w", path, line, err))
			continue
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("read pins file %q after line %d: %w", path, line, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// stripComment removes a "#" comment that starts the line or follows whitespace, and trims.
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
			break
		}
	}
	return strings.TrimSpace(line)
}

// Reload re-reads the pins file and the pins directory (on SIGHUP, and when the
// watcher sees them change). On any error the previous set stays in force and the
// error is returned for the caller to log. Without either it does nothing. It is safe
// to call concurrently with everything else.
func (p *Pinner) Reload() error {
	if !p.cfg.hasPinsFiles() {
		return nil
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	return p.loadFile()
}

// loadFile loads the pins files into force, or records why it could not. A good set
// is saved in the state directory. Caller holds reloadMu.
func (p *Pinner) loadFile() error {
	patterns, files, err := loadPins(p.cfg.PinsFile, p.cfg.PinsDir)
	now := p.now()
	p.fileStatus.Store(&pinsFileStatus{attemptAt: now, files: files, err: err})
	if err != nil {
		return err
	}
	p.set.Store(newMatchSet(p.rules, &pinsFileState{patterns: patterns, loadedAt: now}, p.set.Load().preload))
	log := p.log.WithFields(logrus.Fields{"file": p.cfg.PinsFile, "dir": p.cfg.PinsDir, "files": len(files), "patterns": len(patterns)})
	log.Info("loaded pinned images files")
	saved := savedPinsFile{Path: p.cfg.PinsFile, Dir: p.cfg.PinsDir, Patterns: patternTexts(patterns), LoadedAt: now}
	if err := p.store.save(pinsFileStateName, saved); err != nil {
		log.WithError(err).Warn("cannot save the pins file as the last good one; a bad edit before the next restart would leave no pins file in force")
	}
	return nil
}

// startFile loads the pins file at start-up. A file that cannot be loaded does not
// stop the process: the last good version saved in the state directory stays in
// force (logged loudly, shown in Info); without one, Evaluate refuses to answer until
// a Reload succeeds.
func (p *Pinner) startFile() {
	err := p.loadFile()
	if err == nil {
		return
	}
	log := p.log.WithError(err).WithField("file", p.cfg.PinsFile).WithField("dir", p.cfg.PinsDir)
	var saved savedPinsFile
	found, lerr := p.store.load(pinsFileStateName, &saved)
	if lerr != nil {
		log = log.WithField("state_error", lerr.Error())
	}
	// The saved patterns are those of this configuration's files. A state saved before
	// pins directories existed names none: it was the pins file's alone, and still is.
	if !found || lerr != nil || saved.Path != p.cfg.PinsFile || (saved.Dir != p.cfg.PinsDir && saved.Dir != "") {
		log.Error("PINS FILE NOT LOADED and no earlier good version of it is saved: " +
			"ListImages answers Unavailable until it is fixed and reloaded (SIGHUP)")
		return
	}
	patterns, perr := parsePatterns(saved.Patterns)
	if perr != nil { // written by a good load: cannot happen unless edited by hand
		log.WithField("state_error", perr.Error()).Error("PINS FILE NOT LOADED and its saved version is invalid: " +
			"ListImages answers Unavailable until it is fixed and reloaded (SIGHUP)")
		return
	}
	p.set.Store(newMatchSet(p.rules, &pinsFileState{patterns: patterns, loadedAt: saved.LoadedAt, restored: true}, p.set.Load().preload))
	log.WithFields(logrus.Fields{"patterns": len(patterns), "saved_at": formatTime(saved.LoadedAt)}).
		Error("PINS FILE NOT LOADED: its last good version, saved at start-up or SIGHUP before, stays in force until it is fixed and reloaded (SIGHUP)")
}

// fileErr is Evaluate's error while configured pins files have never been in force.
func (p *Pinner) fileErr(set *matchSet) error {
	if !p.cfg.hasPinsFiles() || set.file != nil {
		return nil
	}
	cause := errors.New("not loaded")
	if st := p.fileStatus.Load(); st != nil && st.err != nil {
		cause = st.err
	}
	return fmt.Errorf("pins files (%s) could not be loaded (%w) and no earlier good version of them is saved: %w: %w",
		p.cfg.pinsFilesText(), cause, ErrNoPinState, cerrdefs.ErrUnavailable)
}
