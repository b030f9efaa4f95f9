package core

import (
	"context"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// KeepPins returns client with keeper around every pull: the pin an image's record
// carries before the pull is put back after it. All the service's pulls go through
// the client it is given, kubelet's PullImage and the sandbox image's pull alike.
// A nil keeper returns client unchanged.
func KeepPins(client docker.Client, keeper PinKeeper) docker.Client {
	if keeper == nil {
		return client
	}
	return &pinKeepingClient{Client: client, keeper: keeper}
}

// pinKeepingClient is a docker.Client whose pulls keep pins.
type pinKeepingClient struct {
	docker.Client
	keeper PinKeeper
}

// PullImage pulls ref and puts back the pin the pull removed from its record (a
// failed pull may have replaced the record too).
func (c *pinKeepingClient) PullImage(ctx context.Context, ref string, opts docker.PullOptions) error {
	restore := c.keeper.KeepPin(ctx, ref)
	defer restore(ctx)
	return c.Client.PullImage(ctx, ref, opts)
}
