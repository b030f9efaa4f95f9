package docker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// ContainerExits streams the IDs of containers whose process ends (the engine's "die"
// events).
func (c *SDKClient) ContainerExits(ctx context.Context) (<-chan string, <-chan error) {
	opts := events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)), filters.Arg("event", string(events.ActionDie)))}
	return streamEvents(ctx, c, opts, func(m events.Message) string { return m.Actor.ID })
}

// ContainerEvents streams the engine's container events from since.
func (c *SDKClient) ContainerEvents(ctx context.Context, since time.Time) (<-chan ContainerEvent, <-chan error) {
	opts := events.ListOptions{Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType))), Since: eventsSince(since)}
	return streamEvents(ctx, c, opts, func(m events.Message) ContainerEvent {
		return ContainerEvent{Action: string(m.Action), ID: m.Actor.ID, Time: time.Unix(0, m.TimeNano)}
	})
}

// eventsSince formats since for the events API ("" for none).
func eventsSince(since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return strconv.FormatInt(since.Unix(), 10) + "." + fmt.Sprintf("%09d", since.Nanosecond())
}

// streamEvents streams the engine's events that opts select, each converted by conv,
// until ctx ends or the stream breaks; the error channel then receives why.
func streamEvents[T any](ctx context.Context, c *SDKClient, opts events.ListOptions, conv func(events.Message) T) (<-chan T, <-chan error) {
	msgs, errs := c.api.Events(ctx, opts)
	out := make(chan T)
	outErr := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			select {
			case m := <-msgs:
				select {
				case out <- conv(m):
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
