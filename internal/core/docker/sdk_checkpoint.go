package docker

import (
	"context"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/checkpoint"
)

// CheckpointContainer asks the engine for a CRIU checkpoint of container id into
// dir/name, leaving the container running. An engine without criu on its host
// answers FailedPrecondition.
func (c *SDKClient) CheckpointContainer(ctx context.Context, id, dir, name string) error {
	op := "checkpoint container " + id
	err := c.api.CheckpointCreate(ctx, id, checkpoint.CreateOptions{CheckpointID: name, CheckpointDir: dir})
	if err != nil && criuMissing(err.Error()) {
		return classifyAs(op+": criu is not installed where the engine runs containers", err, cerrdefs.ErrFailedPrecondition)
	}
	return classify(op, err)
}

// criuMissing tells whether an engine's checkpoint error says that runc found no criu
// binary (the engine passes runc's text on as a plain 500).
func criuMissing(msg string) bool {
	return strings.Contains(msg, "criu") &&
		(strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory"))
}

// ContainerChanges lists the paths container id's writable layer changed.
func (c *SDKClient) ContainerChanges(ctx context.Context, id string) ([]FileChange, error) {
	list, err := c.api.ContainerDiff(ctx, id)
	if err != nil {
		return nil, classify("list the changes of container "+id, err)
	}
	out := make([]FileChange, 0, len(list))
	for _, ch := range list {
		out = append(out, FileChange{Path: ch.Path, Kind: ChangeKind(ch.Kind)})
	}
	return out, nil
}
