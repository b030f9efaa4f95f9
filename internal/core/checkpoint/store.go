package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/renameio/v2"
)

// Store keeps one checkpoint file per sandbox in <root>/sandbox, the layout
// upstream cri-dockerd uses. It holds no state besides the directory, so it is
// safe for concurrent use; concurrent writes of one id leave one whole file.
type Store struct {
	dir string
}

// NewStore returns the store under root, creating <root>/sandbox with mode 0700
// if it does not exist.
func NewStore(root string) (*Store, error) {
	dir := filepath.Join(root, "sandbox")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create checkpoint directory: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Write stores c as the checkpoint of sandbox id, replacing any previous one
// atomically: it writes a temporary file in the same directory with mode 0600,
// syncs it, renames it over the target and syncs the directory. It writes c as
// given, checksum included. An invalid id or a checkpoint without data is an
// errdefs.ErrInvalidArgument.
func (s *Store) Write(id string, c *Checkpoint) error {
	if err := validID(id); err != nil {
		return err
	}
	if c == nil || c.Data == nil {
		return fmt.Errorf("checkpoint of sandbox %q has no data: %w", id, cerrdefs.ErrInvalidArgument)
	}
	b, err := encode(c)
	if err != nil {
		return fmt.Errorf("encode checkpoint of sandbox %q: %w", id, err)
	}
	path := filepath.Join(s.dir, id)
	if err := writeFile(path, b); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	return nil
}

// writeFile replaces path with a file holding b through a synced temporary file
// in the same directory (named "."+id+digits, so hidden from List), then syncs
// the directory, which renameio leaves to its callers. The file is 0600 whatever
// the mode of the one it replaces (upstream wrote 0644): hence not
// renameio.WriteFile, which keeps an existing file's mode.
func writeFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return err
	}
	defer func() { _ = f.Cleanup() }() // removes the temporary file of a failed write; nothing after the rename
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}

// Read returns the checkpoint of sandbox id after verifying its checksum. A
// missing file is an errdefs.ErrNotFound; a file that does not parse, lacks
// data or fails its checksum is an errdefs.ErrDataLoss, and deciding whether to
// delete it is left to the caller, as upstream does. An invalid id is an
// errdefs.ErrInvalidArgument.
func (s *Store) Read(id string) (*Checkpoint, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, id)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: %w", path, cerrdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	c, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return c, nil
}

// encode returns the file content of c: its JSON, fields in upstream's order.
func encode(c *Checkpoint) ([]byte, error) {
	return json.Marshal(c)
}

// decode parses the file content of a checkpoint and verifies its checksum; content
// that does not parse, lacks data or fails its checksum is an errdefs.ErrDataLoss.
func decode(b []byte) (*Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse: %w: %w", err, cerrdefs.ErrDataLoss)
	}
	if err := c.Verify(); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return &c, nil
}

// Remove deletes the checkpoint of sandbox id; a missing one is not an error.
// An invalid id is an errdefs.ErrInvalidArgument.
func (s *Store) Remove(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	path := filepath.Join(s.dir, id)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove checkpoint %s: %w", path, err)
	}
	return nil
}

// List returns the ids of the checkpoint files in the store, sorted, skipping
// hidden files (the temporary files of Write among them) and anything that is
// not a regular file. It does not read or verify the files.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints in %s: %w", s.dir, err)
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		ids = append(ids, e.Name())
	}
	return ids, nil
}

// validID reports an errdefs.ErrInvalidArgument unless id can name a file
// directly inside the store: not empty, no path separator or NUL, and not
// starting with "." (which also rules out "." and "..", and keeps ids apart
// from temporary and hidden files).
func validID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty sandbox id: %w", cerrdefs.ErrInvalidArgument)
	case strings.ContainsAny(id, "/\x00") || strings.ContainsRune(id, filepath.Separator):
		return fmt.Errorf("sandbox id %q contains a path separator or NUL: %w", id, cerrdefs.ErrInvalidArgument)
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("sandbox id %q starts with a dot: %w", id, cerrdefs.ErrInvalidArgument)
	}
	return nil
}
