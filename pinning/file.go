package pinning

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// pinsFileState is one successfully loaded pins file. It is immutable.
type pinsFileState struct {
	patterns []Pattern
	loadedAt time.Time
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

// loadFile loads the pins file into force, or records why it could not. Caller holds reloadMu.
func (p *Pinner) loadFile() error {
	patterns, err := loadPinsFile(p.cfg.PinsFile)
	now := p.now()
	p.fileStatus.Store(&pinsFileStatus{attemptAt: now, err: err})
	if err != nil {
		return err
	}
	p.set.Store(newMatchSet(p.rules, &pinsFileState{patterns: patterns, loadedAt: now}))
	p.log.WithFields(logrus.Fields{"file": p.cfg.PinsFile, "patterns": len(patterns)}).
		Info("loaded pinned images file")
	return nil
}
