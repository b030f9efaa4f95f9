package pinner

import (
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
)

// pinsFileState is one successfully loaded pins file. It is immutable.
type pinsFileState struct {
	patterns []pin.Pattern
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

// pinsFileStatus is the outcome of the most recent load attempt. It is immutable.
type pinsFileStatus struct {
	attemptAt time.Time
	files     []string // the files read (the pins file, then the directory's)
	err       error
}

// Reload re-reads the pins file and the pins directory (on SIGHUP, and when the
// watcher sees them change). On any error the previous set stays in force and the
// error is returned for the caller to log. Without either it does nothing. It is safe
// to call concurrently with everything else.
func (p *Pinner) Reload() error {
	if !p.cfg.HasPinsFiles() {
		return nil
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	return p.loadFile()
}

// loadFile loads the pins files into force, or records why it could not. A good set
// is saved in the state directory. Caller holds reloadMu.
func (p *Pinner) loadFile() error {
	patterns, files, err := pin.LoadPins(p.cfg.PinsFile, p.cfg.PinsDir)
	now := p.now()
	p.fileStatus.Store(&pinsFileStatus{attemptAt: now, files: files, err: err})
	if err != nil {
		return err
	}
	p.set.Store(newMatchSet(p.rules, &pinsFileState{patterns: patterns, loadedAt: now}, p.set.Load().preload))
	log := p.log.WithFields(logrus.Fields{"file": p.cfg.PinsFile, "dir": p.cfg.PinsDir, "files": len(files), "patterns": len(patterns)})
	log.Info("loaded pinned images files")
	saved := savedPinsFile{Path: p.cfg.PinsFile, Dir: p.cfg.PinsDir, Patterns: patternTexts(patterns), LoadedAt: now}
	if err := p.store.Save(pinsFileStateName, saved); err != nil {
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
	found, lerr := p.store.Load(pinsFileStateName, &saved)
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
	patterns, perr := pin.ParsePatterns(saved.Patterns)
	if perr != nil { // written by a good load: cannot happen unless edited by hand
		log.WithField("state_error", perr.Error()).Error("PINS FILE NOT LOADED and its saved version is invalid: " +
			"ListImages answers Unavailable until it is fixed and reloaded (SIGHUP)")
		return
	}
	p.set.Store(newMatchSet(p.rules, &pinsFileState{patterns: patterns, loadedAt: saved.LoadedAt, restored: true}, p.set.Load().preload))
	log.WithFields(logrus.Fields{"patterns": len(patterns), "saved_at": pin.FormatTime(saved.LoadedAt)}).
		Error("PINS FILE NOT LOADED: its last good version, saved at start-up or SIGHUP before, stays in force until it is fixed and reloaded (SIGHUP)")
}

// fileErr is Evaluate's error while configured pins files have never been in force.
func (p *Pinner) fileErr(set *matchSet) error {
	if !p.cfg.HasPinsFiles() || set.file != nil {
		return nil
	}
	cause := errors.New("not loaded")
	if st := p.fileStatus.Load(); st != nil && st.err != nil {
		cause = st.err
	}
	return fmt.Errorf("pins files (%s) could not be loaded (%w) and no earlier good version of them is saved: %w: %w",
		p.cfg.pinsFilesText(), cause, pin.ErrNoPinState, cerrdefs.ErrUnavailable)
}
