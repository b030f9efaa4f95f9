// Package statefile keeps pinning's state files: atomic JSON writes in one directory
// (Store), and OpenRegular, which opens the pins and preload files as regular files only.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Store keeps pin state that must outlive the process (the last good snapshot of
// each source, the last good pins file, what each preload archive pinned) as JSON
// files in one directory. Writes are atomic: a temporary file in the same directory
// is written, synced and renamed over the old one, and the directory synced, so a
// crash or power cut leaves the old file or the new one, never a torn one. A zero
// Store (no directory) keeps nothing.
type Store struct {
	Dir string // "" keeps nothing
}

// stateFileMode keeps the state readable by root only, like sandbox checkpoints.
const stateFileMode = 0o600

// Save writes v as the state called name.
func (s Store) Save(name string, v any) error {
	if s.Dir == "" {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode pin state %s: %w", name, err)
	}
	return s.SaveBytes(name, b)
}

// SaveBytes replaces the state called name with b, mode 0600 whatever the mode of
// the file it replaces (hence not renameio.WriteFile, which keeps an existing
// file's mode), and syncs the directory, which renameio leaves to its callers.
func (s Store) SaveBytes(name string, b []byte) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("pin state directory: %w", err)
	}
	f, err := renameio.NewPendingFile(s.Path(name), renameio.WithTempDir(s.Dir), renameio.WithStaticPermissions(stateFileMode))
	if err == nil {
		defer func() { _ = f.Cleanup() }() // removes a failed write; nothing after the rename
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.CloseAtomicallyReplace()
	}
	if err != nil {
		return fmt.Errorf("write pin state %s: %w", name, err)
	}
	return syncDir(s.Dir)
}

// Load reads the state called name into v; found is false when there is none.
func (s Store) Load(name string, v any) (found bool, err error) {
	if s.Dir == "" {
		return false, nil
	}
	b, err := os.ReadFile(s.Path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read pin state %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("pin state %s is corrupt: %w", s.Path(name), err)
	}
	return true, nil
}

// Path is the file of the state called name.
func (s Store) Path(name string) string { return filepath.Join(s.Dir, name+".json") }

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync pin state directory: %w", err)
	}
	defer func() { _ = d.Close() }() // read-only handle
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync pin state directory: %w", err)
	}
	return nil
}
