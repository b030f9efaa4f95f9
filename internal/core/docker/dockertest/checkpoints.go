package dockertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// CheckpointImages are the files the fake's CheckpointContainer writes, as CRIU
// names a dump's images; each holds "<name> of <container ID>".
func CheckpointImages() []string { return []string{"inventory.img", "pstree.img", "pages-1.img"} }

// SetChanges makes changes what ContainerChanges reports for container id; it
// panics when there is no such container.
func (f *Fake) SetChanges(id string, changes ...docker.FileChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		panic("dockertest: SetChanges of an unknown container " + id)
	}
	c.changes = slices.Clone(changes)
}

// ContainerChanges implements docker.Client.
func (f *Fake) ContainerChanges(ctx context.Context, id string) ([]docker.FileChange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "ContainerChanges", "list the changes of container", id)
	if err != nil {
		return nil, err
	}
	return slices.Clone(c.changes), nil
}

// CheckpointContainer implements docker.Client as the engine does: without
// experimental features (Info.Experimental) the route does not exist (NotFound); a
// container that is not running is a Conflict; otherwise CheckpointImages are
// written into dir/name and the container goes on running.
func (f *Fake) CheckpointContainer(ctx context.Context, id, dir, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "CheckpointContainer", "checkpoint container", id)
	if err != nil {
		return err
	}
	if !f.info.Experimental {
		return fmt.Errorf("checkpoint container %s: page not found: %w", id, cerrdefs.ErrNotFound)
	}
	if c.details.State != docker.StateRunning {
		return fmt.Errorf("checkpoint container %s: container is not running: %w", id, cerrdefs.ErrConflict)
	}
	out := filepath.Join(dir, name)
	if err := os.MkdirAll(out, 0o700); err != nil {
		return fmt.Errorf("checkpoint container %s: %w", id, err)
	}
	for _, img := range CheckpointImages() {
		if err := os.WriteFile(filepath.Join(out, img), []byte(img+" of "+c.details.ID), 0o600); err != nil {
			return fmt.Errorf("checkpoint container %s: %w", id, err)
		}
	}
	return nil
}
