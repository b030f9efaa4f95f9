package dockertest

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// subscriber is one open event stream.
type subscriber struct {
	events chan docker.ImageEvent
	errs   chan error
}

// BreakEvents ends every open event stream with err, as an engine restart does.
func (f *Fake) BreakEvents(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breakStreams(err)
}

func (f *Fake) breakStreams(err error) {
	for sub := range f.subs {
		sub.errs <- err
		delete(f.subs, sub)
	}
	for sub := range f.ctrSubs {
		sub.errs <- err
		delete(f.ctrSubs, sub)
	}
}

// ctrSubscriber is one open container event stream.
type ctrSubscriber struct {
	events chan docker.ContainerEvent
	errs   chan error
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
	if f.ctrMuted {
		return
	}
	ev := docker.ContainerEvent{Action: action, ID: id, Time: time.Now()}
	f.ctrHistory = append(f.ctrHistory, ev)
	for sub := range f.ctrSubs {
		select {
		case sub.events <- ev:
		default:
			sub.errs <- fmt.Errorf("event stream overflow: %w", cerrdefs.ErrUnavailable)
			delete(f.ctrSubs, sub)
		}
	}
}

// ContainerEvents implements docker.Client: events since since are replayed first.
func (f *Fake) ContainerEvents(ctx context.Context, since time.Time) (<-chan docker.ContainerEvent, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &ctrSubscriber{events: make(chan docker.ContainerEvent, 4096), errs: make(chan error, 1)}
	if err := f.check(ctx, "ContainerEvents"); err != nil {
		sub.errs <- err
		return sub.events, sub.errs
	}
	for _, ev := range f.ctrHistory {
		if !ev.Time.Before(since) {
			sub.events <- ev
		}
	}
	f.ctrSubs[sub] = true
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.ctrSubs[sub] {
			delete(f.ctrSubs, sub)
			sub.errs <- ctx.Err()
		}
	}()
	return sub.events, sub.errs
}

// publish records an event and sends it to every stream. Caller holds mu.
func (f *Fake) publish(action, id, name string) {
	ev := docker.ImageEvent{Action: action, ID: id, Name: name, Time: time.Now()}
	f.history = append(f.history, ev)
	for sub := range f.subs {
		select {
		case sub.events <- ev:
		default: // a consumer that cannot keep up loses its stream, as with the engine
			sub.errs <- fmt.Errorf("event stream overflow: %w", cerrdefs.ErrUnavailable)
			delete(f.subs, sub)
		}
	}
}

// ImageEvents implements docker.Client: events since since are replayed first.
func (f *Fake) ImageEvents(ctx context.Context, since time.Time) (<-chan docker.ImageEvent, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &subscriber{events: make(chan docker.ImageEvent, 4096), errs: make(chan error, 1)}
	if err := f.check(ctx, "ImageEvents"); err != nil {
		sub.errs <- err
		return sub.events, sub.errs
	}
	for _, ev := range f.history {
		if !ev.Time.Before(since) {
			sub.events <- ev
		}
	}
	f.subs[sub] = true
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.subs[sub] {
			delete(f.subs, sub)
			sub.errs <- ctx.Err()
		}
	}()
	return sub.events, sub.errs
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
