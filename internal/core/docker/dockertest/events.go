package dockertest

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// eventLog is one kind of event: what was sent, and the open streams.
type eventLog[T any] struct {
	history []T
	subs    map[*stream[T]]bool
}

// stream is one open event stream.
type stream[T any] struct {
	events chan T
	errs   chan error
}

// BreakEvents ends every open event stream with err, as an engine restart does.
func (f *Fake) BreakEvents(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breakStreams(err)
}

func (f *Fake) breakStreams(err error) {
	f.imageEvs.breakAll(err)
	f.ctrs.breakAll(err)
}

func (l *eventLog[T]) breakAll(err error) {
	for sub := range l.subs {
		sub.errs <- err
		delete(l.subs, sub)
	}
}

// send records ev and sends it to every stream; a stream that cannot keep up is
// ended, as with the engine. Caller holds the fake's mu.
func (l *eventLog[T]) send(ev T) {
	l.history = append(l.history, ev)
	for sub := range l.subs {
		select {
		case sub.events <- ev:
		default:
			sub.errs <- fmt.Errorf("event stream overflow: %w", cerrdefs.ErrUnavailable)
			delete(l.subs, sub)
		}
	}
}

// open opens a stream of l's events (method, for faults), replaying those at or after
// since (timeOf says when one happened), until ctx ends.
func open[T any](f *Fake, l *eventLog[T], ctx context.Context, method string, since time.Time, timeOf func(T) time.Time) (<-chan T, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &stream[T]{events: make(chan T, 4096), errs: make(chan error, 1)}
	if err := f.check(ctx, method); err != nil {
		sub.errs <- err
		return sub.events, sub.errs
	}
	for _, ev := range l.history {
		if !timeOf(ev).Before(since) {
			sub.events <- ev
		}
	}
	if l.subs == nil {
		l.subs = map[*stream[T]]bool{}
	}
	l.subs[sub] = true
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if l.subs[sub] {
			delete(l.subs, sub)
			sub.errs <- ctx.Err()
		}
	}()
	return sub.events, sub.errs
}

// publish records an image event and sends it to every stream. Caller holds mu.
func (f *Fake) publish(action, id, name string) {
	f.imageEvs.send(docker.ImageEvent{Action: action, ID: id, Name: name, Time: time.Now()})
}

// ImageEvents implements docker.Client: events since since are replayed first.
func (f *Fake) ImageEvents(ctx context.Context, since time.Time) (<-chan docker.ImageEvent, <-chan error) {
	return open(f, &f.imageEvs, ctx, "ImageEvents", since, func(ev docker.ImageEvent) time.Time { return ev.Time })
}

// MuteContainerEvents stops (true) or resumes (false) sending container events, as
// when the engine's events lag behind its state.
func (f *Fake) MuteContainerEvents(mute bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctrMuted = mute
}

// PublishContainerEvent sends a container event as the engine would (an exec's, say).
func (f *Fake) PublishContainerEvent(action, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishContainer(action, id)
}

// publishContainer records a container event and sends it to every container event
// stream, unless muted. Caller holds mu.
func (f *Fake) publishContainer(action, id string) {
	if !f.ctrMuted {
		f.ctrs.send(docker.ContainerEvent{Action: action, ID: id, Time: time.Now()})
	}
}

// ContainerEventsSent counts the container events sent so far.
func (f *Fake) ContainerEventsSent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ctrs.history)
}

// ContainerEvents implements docker.Client: events since since are replayed first.
func (f *Fake) ContainerEvents(ctx context.Context, since time.Time) (<-chan docker.ContainerEvent, <-chan error) {
	return open(f, &f.ctrs, ctx, "ContainerEvents", since, func(ev docker.ContainerEvent) time.Time { return ev.Time })
}

// ContainerExits implements docker.Client: the IDs of containers stopped from now on
// (StopContainer, SetContainerState to exited or dead).
func (f *Fake) ContainerExits(ctx context.Context) (<-chan string, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, errs := make(chan string, 4096), make(chan error, 1)
	if err := f.check(ctx, "ContainerExits"); err != nil {
		errs <- err
		return ch, errs
	}
	f.exitSubs[ch] = true
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.exitSubs, ch)
		errs <- ctx.Err()
	}()
	return ch, errs
}

// publishExit sends id to every ContainerExits stream. Caller holds mu.
func (f *Fake) publishExit(id string) {
	for ch := range f.exitSubs {
		select {
		case ch <- id:
		default: // a consumer that cannot keep up misses it
		}
	}
}
