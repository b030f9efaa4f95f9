package docker

import (
	"context"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// ContainerExits streams the IDs of containers whose process ends (the engine's "die"
// events).
func (c *SDKClient) ContainerExits(ctx context.Context) (<-chan string, <-chan error) {
	opts := events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)), filters.Arg("event", string(events.ActionDie)))}
	msgs, errs := c.api.Events(ctx, opts)
	out := make(chan string)
	outErr := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			select {
			case m := <-msgs:
				select {
				case out <- m.Actor.ID:
				case <-ctx.Done():
					outErr <- ctx.Err()
					return
				}
			case err := <-errs:
				outErr <- classify("docker events", err)
				return
			}
		}
	}()
	return out, outErr
}
