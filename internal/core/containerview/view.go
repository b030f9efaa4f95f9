// Package containerview answers the engine's container lists from its last full list
// while nothing has changed since, as the image cache does for images: kubelet lists
// every sandbox and every container each second (its PLEG relist), and on a quiet node
// the engine need not be asked each time.
package containerview

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// View is a docker.Client whose ListContainers answers from the last full list of the
// engine's containers while that list is known to be current:
//   - the engine's container event stream is up (events since before it was opened
//     are replayed, so none falls between two streams);
//   - no container event that changes what a list shows (anything but execs, health
//     checks, attaches, ...) arrived since the list was asked for;
//   - no container was created, started, stopped or removed through this View since
//     (the change is applied before its event arrives: a list asked for after
//     StartContainer returned never shows the container as not started);
//   - it is younger than MaxAge (a slow resync, should an event ever be lost).
//
// Otherwise the engine is asked for the full list, which is kept only if no change
// happened while it was asked for (a list older than a change never becomes current).
// While changes keep coming (one less than Quiet ago: pods starting or stopping by the
// hundred) a full list would be stale at once, so the engine is asked for what the
// caller asked, which it filters: a stop's list of the sandbox's running containers
// stays one container long instead of the whole node's.
// Lists of sizes and lists by ID go to the engine; the rest of docker.Client passes
// through.
type View struct {
	docker.Client
	maxAge time.Duration
	quiet  time.Duration
	log    logrus.FieldLogger

	mu        sync.Mutex
	gen       uint64 // counts changes: events, mutations, streams lost or opened
	streaming bool
	list      []docker.Container
	listGen   uint64
	listAt    time.Time
	changedAt time.Time // the last change
	hits      uint64
	misses    uint64
	filtered  uint64 // misses the engine filtered (changes kept coming)
	events    uint64 // container events received
}

// New returns a View over c, resyncing at least every maxAge, and asking the engine for
// filtered lists instead of full ones while the last change is less than quiet ago.
func New(c docker.Client, maxAge, quiet time.Duration, log logrus.FieldLogger) *View {
	return &View{Client: c, maxAge: maxAge, quiet: quiet, log: log}
}

// ListContainers answers from the current full list, else from the engine.
func (v *View) ListContainers(ctx context.Context, f docker.ContainerFilter) ([]docker.Container, error) {
	if f.Size || f.ID != "" {
		return v.Client.ListContainers(ctx, f)
	}
	v.mu.Lock()
	now := time.Now()
	if v.current(now) {
		list := v.list
		v.hits++
		v.mu.Unlock()
		return filter(list, f), nil
	}
	gen := v.gen
	v.misses++
	busy := now.Sub(v.changedAt) < v.quiet
	if busy {
		v.filtered++
	}
	v.mu.Unlock()
	if busy {
		return v.Client.ListContainers(ctx, f)
	}
	all, err := v.Client.ListContainers(ctx, docker.ContainerFilter{})
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if v.streaming && v.gen == gen {
		v.list, v.listGen, v.listAt = all, gen, time.Now()
	}
	v.mu.Unlock()
	return filter(all, f), nil
}

// current tells whether the kept list may answer. Caller holds mu.
func (v *View) current(now time.Time) bool {
	return v.streaming && v.list != nil && v.listGen == v.gen && now.Sub(v.listAt) < v.maxAge
}

// changed records a change: no list asked for before it answers after it.
func (v *View) changed() {
	v.mu.Lock()
	v.bump()
	v.mu.Unlock()
}

// bump records a change now. Caller holds mu.
func (v *View) bump() {
	v.gen++
	v.changedAt = time.Now()
}

// mutate runs a change to containers through the engine, recording it before (a list
// asked for meanwhile is not kept) and after (the next list asks the engine).
func mutate[T any](v *View, f func() (T, error)) (T, error) {
	v.changed()
	defer v.changed()
	return f()
}

// CreateContainer implements docker.Client.
func (v *View) CreateContainer(ctx context.Context, spec docker.ContainerSpec) (string, error) {
	return mutate(v, func() (string, error) { return v.Client.CreateContainer(ctx, spec) })
}

// StartContainer implements docker.Client.
func (v *View) StartContainer(ctx context.Context, id string) error {
	_, err := mutate(v, func() (struct{}, error) { return struct{}{}, v.Client.StartContainer(ctx, id) })
	return err
}

// StopContainer implements docker.Client.
func (v *View) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	_, err := mutate(v, func() (struct{}, error) { return struct{}{}, v.Client.StopContainer(ctx, id, timeout) })
	return err
}

// RemoveContainer implements docker.Client.
func (v *View) RemoveContainer(ctx context.Context, id string) error {
	_, err := mutate(v, func() (struct{}, error) { return struct{}{}, v.Client.RemoveContainer(ctx, id) })
	return err
}

// Run follows the engine's container events until ctx ends, reopening the stream
// (after retry) when it breaks; while it is down every list asks the engine.
func (v *View) Run(ctx context.Context, retry time.Duration) {
	for ctx.Err() == nil {
		err := v.follow(ctx)
		v.mu.Lock()
		v.streaming = false
		v.bump()
		v.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		v.log.WithError(err).Debug("container event stream broke: container lists ask the engine until it is back")
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// follow opens one event stream and applies its events until it breaks.
func (v *View) follow(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	since := time.Now()
	evs, errs := v.ContainerEvents(ctx, since)
	v.mu.Lock()
	v.streaming = true
	v.bump() // lists from before the stream was opened are not kept
	v.mu.Unlock()
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				return <-errs
			}
			v.mu.Lock()
			v.events++
			if changesLists(ev.Action) {
				v.bump()
			}
			v.mu.Unlock()
		case err := <-errs:
			return err
		}
	}
}

// changesLists tells whether a container event's action may change what a list shows
// (state, name, labels, the container itself). Unknown actions count as changes.
func changesLists(action string) bool {
	base, _, _ := strings.Cut(action, ":") // "exec_start: sh -c ...", "health_status: healthy"
	switch base {
	case "exec_create", "exec_start", "exec_die", "exec_detach", "health_status",
		"attach", "detach", "resize", "top", "commit", "copy", "export", "archive-path", "extract-to-dir":
		return false
	}
	return true
}

// State returns the View's counters for verbose Status.
func (v *View) State() map[string]any {
	v.mu.Lock()
	defer v.mu.Unlock()
	return map[string]any{"streaming": v.streaming, "hits": v.hits, "misses": v.misses, "filtered": v.filtered, "events": v.events, "current": v.current(time.Now())}
}

// filter selects what f selects from a full list, as the engine does: every label
// equal, and with Running only the containers that run (running, paused or
// restarting: the engine's list without "all"). Each is a copy: callers may change it.
func filter(all []docker.Container, f docker.ContainerFilter) []docker.Container {
	out := make([]docker.Container, 0, len(all))
	for _, c := range all {
		if f.Running && c.State != docker.StateRunning && c.State != docker.StatePaused && c.State != docker.StateRestarting {
			continue
		}
		if !hasLabels(c.Labels, f.Labels) {
			continue
		}
		c.Labels = maps.Clone(c.Labels)
		out = append(out, c)
	}
	return out
}

func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
