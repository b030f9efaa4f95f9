package logs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/google/renameio/v2"
)

// records are the log files chosen for containers (CreateContainer's log directory
// and path), one JSON file per container in a directory of our own, so that after a
// restart copies resume to those files and not to a path read back from a container
// label, which anyone with the engine's socket can set.
type records struct {
	dir string // "" keeps them in memory only

	mu sync.Mutex
	m  map[string]LogFile
	// fresh tells that dir did not exist when the records were opened: nothing was
	// recorded yet on this node (the first start of a version that records).
	fresh bool
	err   error // why dir could not be read
}

func newRecords(dir string) *records {
	r := &records{dir: dir, m: map[string]LogFile{}}
	if dir == "" {
		return r
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.fresh = true
		return r
	case err != nil:
		r.err = err
		return r
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var lf LogFile
		if json.Unmarshal(b, &lf) == nil && lf.Validate() == nil {
			r.m[id] = lf
		}
	}
	return r
}

// Record records lf as the log file of container id (CreateContainer).
func (m *Manager) Record(id string, lf LogFile) error {
	if err := lf.Validate(); err != nil {
		return err
	}
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return fmt.Errorf("container ID %q cannot name a log record: %w", id, errdefs.ErrInvalidArgument)
	}
	r := m.records
	if r.dir != "" {
		if err := writeRecord(r.dir, id, lf); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[id] = lf
	return nil
}

// Recorded returns the log file recorded for container id.
func (m *Manager) Recorded(id string) (LogFile, bool) {
	return m.records.get(id)
}

// Forget drops the record of container id (RemoveContainer).
func (m *Manager) Forget(id string) {
	r := m.records
	r.mu.Lock()
	delete(r.m, id)
	r.mu.Unlock()
	if r.dir != "" && id != "" && !strings.ContainsAny(id, `/\`) {
		_ = os.Remove(filepath.Join(r.dir, id+".json")) // gone already: nothing to forget
	}
}

// AdoptsLabels tells that nothing was recorded on this node before this process:
// containers created by an earlier version of this binary may then be recorded from
// their log path label, once, when their logs are resumed at start-up.
func (m *Manager) AdoptsLabels() bool {
	return m.records.fresh
}

func (r *records) get(id string) (LogFile, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lf, ok := r.m[id]
	return lf, ok
}

// writeRecord writes one record atomically (synced temporary file in dir, rename),
// mode 0600.
func writeRecord(dir, id string, lf LogFile) error {
	b, err := json.Marshal(lf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("log records: %w", err)
	}
	if err := renameio.WriteFile(filepath.Join(dir, id+".json"), b, 0o600, renameio.WithTempDir(dir)); err != nil {
		return fmt.Errorf("log record of container %s: %w", id, err)
	}
	return nil
}
