package pinning

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
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

// savedPinsFile is the state file of the last good pins file.
type savedPinsFile struct {
	Path     string    `json:"path"`
	Patterns []string  `json:"patterns"`
	LoadedAt time.Time `json:"loadedAt"`
}

// pinsFileStateName is the name of the pins file's state file.
const pinsFileStateName = "pins-file"

// CheckPinsFile validates the pins file at path as Reload would read it, without
// touching a running daemon (cri-dockerd --check-pins-file, ExecReload-style tooling).
// It returns the number of patterns, or an error naming each bad line.
func CheckPinsFile(path string) (int, error) {
	patterns, err := loadPinsFile(path)
	return len(patterns), err
}

// pinsFileStatus is the outcome of the most recent load attempt. It is immutable.
type pinsFileStatus struct {
	attemptAt time.Time
	err       error
}

// loadPinsFile reads and parses a pins file.
func loadPinsFile(path string) ([]Pattern, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pins file: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	return parsePins(path, f)
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

// Reload re-reads the pins file (on SIGHUP). On any error the previous set stays
// in force and the error is returned for the caller to log. Without a pins file it
// does nothing. It is safe to call concurrently with everything else.
func (p *Pinner) Reload() error {
	if p.cfg.PinsFile == "" {
		return nil
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	return p.loadFile()
}

// loadFile loads the pins file into force, or records why it could not. A good file
// is saved in the state directory. Caller holds reloadMu.
func (p *Pinner) loadFile() error {
	patterns, err := loadPinsFile(p.cfg.PinsFile)
	now := p.now()
	p.fileStatus.Store(&pinsFileStatus{attemptAt: now, err: err})
	if err != nil {
		return err
	}
	p.set.Store(newMatchSet(p.rules, &pinsFileState{patterns: patterns, loadedAt: now}, p.set.Load().preload))
	log := p.log.WithFields(logrus.Fields{"file": p.cfg.PinsFile, "patterns": len(patterns)})
	log.Info("loaded pinned images file")
	saved := savedPinsFile{Path: p.cfg.PinsFile, Patterns: patternTexts(patterns), LoadedAt: now}
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
	log := p.log.WithError(err).WithField("file", p.cfg.PinsFile)
	var saved savedPinsFile
	found, lerr := p.store.load(pinsFileStateName, &saved)
	if lerr != nil {
		log = log.WithField("state_error", lerr.Error())
	}
	if !found || lerr != nil || saved.Path != p.cfg.PinsFile {
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

// fileErr is Evaluate's error while a configured pins file has never been in force.
func (p *Pinner) fileErr(set *matchSet) error {
	if p.cfg.PinsFile == "" || set.file != nil {
		return nil
	}
	cause := errors.New("not loaded")
	if st := p.fileStatus.Load(); st != nil && st.err != nil {
		cause = st.err
	}
	return fmt.Errorf("pins file %s could not be loaded (%w) and no earlier good version of it is saved: %w: %w",
		p.cfg.PinsFile, cause, ErrNoPinState, cerrdefs.ErrUnavailable)
}
