package containerview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

const image = "busybox:1"

type env struct {
	engine *dockertest.Fake
	view   *View
}

func newEnv(t *testing.T, maxAge time.Duration) *env {
	t.Helper()
	return newEnvQuiet(t, maxAge, 0)
}

// newEnvQuiet is newEnv with the view asking for filtered lists while the last change
// is less than quiet ago.
func newEnvQuiet(t *testing.T, maxAge, quiet time.Duration) *env {
	t.Helper()
	engine := dockertest.New()
	engine.AddImage(docker.Image{ID: "sha256:" + strings.Repeat("a", 64), RepoTags: []string{image}})
	v := New(engine, maxAge, quiet, logctx.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.Run(ctx, 10*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{engine: engine, view: v}
	e.waitStreaming(t)
	return e
}

func (e *env) waitStreaming(t *testing.T) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		e.view.mu.Lock()
		defer e.view.mu.Unlock()
		if !e.view.streaming {
			return poll.Continue("not streaming")
		}
		return poll.Success()
	}, poll.WithDelay(time.Millisecond))
}

func (e *env) create(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	id, err := e.view.CreateContainer(context.Background(), docker.ContainerSpec{Name: name, Image: image, Labels: labels})
	assert.NilError(t, err)
	return id
}

func (e *env) list(t *testing.T, f docker.ContainerFilter) []docker.Container {
	t.Helper()
	l, err := e.view.ListContainers(context.Background(), f)
	assert.NilError(t, err)
	return l
}

// engineLists counts the engine's list calls.
func (e *env) engineLists() int { return e.engine.Calls("ListContainers") }

// waitUncached waits until the view no longer answers from its list (an event was
// applied), then lists once through the engine.
func (e *env) waitUncached(t *testing.T) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		e.view.mu.Lock()
		defer e.view.mu.Unlock()
		if e.view.current(time.Now()) {
			return poll.Continue("still current")
		}
		return poll.Success()
	}, poll.WithDelay(time.Millisecond))
}

// settle waits until the view has applied every container event sent so far (one
// stream: the view has received them all), then lists once: the view is current.
func (e *env) settle(t *testing.T) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		e.view.mu.Lock()
		got := e.view.events
		e.view.mu.Unlock()
		if sent := e.engine.ContainerEventsSent(); got < uint64(sent) {
			return poll.Continue("%d of %d events applied", got, sent)
		}
		return poll.Success()
	}, poll.WithDelay(time.Millisecond))
	e.list(t, docker.ContainerFilter{})
}

func TestQuietListsDoNotReachTheEngine(t *testing.T) {
	e := newEnv(t, time.Hour)
	sb := e.create(t, "sb", map[string]string{"type": "podsandbox"})
	c := e.create(t, "c", map[string]string{"type": "container", "sandbox": sb})
	assert.NilError(t, e.view.StartContainer(context.Background(), sb))
	e.settle(t)

	all := e.list(t, docker.ContainerFilter{})
	calls := e.engineLists()
	for range 5 {
		assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{}), 2))
		assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Labels: map[string]string{"type": "podsandbox"}}), 1))
	}
	assert.Check(t, is.Equal(e.engineLists(), calls), "answered from the view")
	assert.Check(t, is.Len(all, 2))

	// The view's filters select what the engine's do.
	for _, f := range []docker.ContainerFilter{
		{}, {Running: true}, {Labels: map[string]string{"type": "container"}},
		{Labels: map[string]string{"type": "container", "sandbox": sb}}, {Labels: map[string]string{"sandbox": "other"}},
		{Running: true, Labels: map[string]string{"type": "container"}},
	} {
		want, err := e.engine.ListContainers(context.Background(), f)
		assert.NilError(t, err)
		got := e.list(t, f)
		assert.Check(t, is.DeepEqual(got, want), "filter %+v", f)
	}

	// A caller changing what it got does not change the view.
	got := e.list(t, docker.ContainerFilter{})
	got[0].Labels["type"] = "changed"
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Labels: map[string]string{"type": "changed"}}), 0))
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Labels: map[string]string{"sandbox": sb}}), 1), c)
}

func TestOwnChangesAreSeenAtOnce(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.engine.MuteContainerEvents(true) // the engine's events lag: only our own record of the change counts
	id := e.create(t, "c", nil)
	assert.Check(t, is.Equal(e.list(t, docker.ContainerFilter{})[0].State, docker.StateCreated))
	assert.NilError(t, e.view.StartContainer(context.Background(), id))
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Running: true}), 1), "started: shown running at once")
	assert.NilError(t, e.view.StopContainer(context.Background(), id, time.Second))
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Running: true}), 0), "stopped: shown at once")
	assert.NilError(t, e.view.RemoveContainer(context.Background(), id))
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{}), 0), "removed: gone at once")
}

func TestChangesBehindOurBack(t *testing.T) {
	e := newEnv(t, time.Hour)
	id := e.create(t, "c", nil)
	assert.NilError(t, e.view.StartContainer(context.Background(), id))
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Running: true}), 1))
	e.list(t, docker.ContainerFilter{}) // current again

	// The container dies on its own: its event makes the next list ask the engine.
	e.engine.SetContainerState(id, docker.StateExited, 137)
	e.waitUncached(t)
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Running: true}), 0))

	// An exec's events change nothing a list shows.
	e.settle(t)
	calls := e.engineLists()
	e.engine.PublishContainerEvent("exec_start: /bin/probe", id)
	e.engine.PublishContainerEvent("exec_die", id)
	e.engine.PublishContainerEvent("health_status: healthy", id)
	time.Sleep(20 * time.Millisecond)
	e.list(t, docker.ContainerFilter{})
	assert.Check(t, is.Equal(e.engineLists(), calls), "execs do not invalidate")
	e.engine.PublishContainerEvent("something-new", id)
	e.waitUncached(t)
}

func TestLostEventsBoundedByMaxAge(t *testing.T) {
	e := newEnv(t, 200*time.Millisecond)
	id := e.create(t, "c", nil)
	e.settle(t)
	e.engine.MuteContainerEvents(true) // an event lost
	e.engine.SetContainerState(id, docker.StateRunning, 0)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if len(e.list(t, docker.ContainerFilter{Running: true})) != 1 {
			return poll.Continue("not seen yet")
		}
		return poll.Success()
	}, poll.WithDelay(5*time.Millisecond))
}

func TestStreamLossAsksTheEngine(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create(t, "c", nil)
	e.list(t, docker.ContainerFilter{})
	e.engine.InjectError("ContainerEvents", errors.New("still down"))
	e.engine.BreakEvents(fmt.Errorf("engine restarted: %w", cerrdefs.ErrUnavailable))
	e.waitUncached(t)
	time.Sleep(30 * time.Millisecond) // a few failed reconnects
	calls := e.engineLists()
	e.list(t, docker.ContainerFilter{})
	e.list(t, docker.ContainerFilter{})
	assert.Check(t, is.Equal(e.engineLists(), calls+2), "every list asks the engine while the stream is down")

	// The engine's list failing fails the list: no answer from an old view.
	e.engine.InjectError("ListContainers", fmt.Errorf("down: %w", cerrdefs.ErrUnavailable))
	_, err := e.view.ListContainers(context.Background(), docker.ContainerFilter{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "%v", err)
	e.engine.InjectError("ListContainers", nil)

	e.engine.InjectError("ContainerEvents", nil)
	e.waitStreaming(t)
	e.settle(t) // current again once the stream is back
}

// A list the engine answered before a change, but that returns after it, is not kept.
func TestListOlderThanAChangeIsNotKept(t *testing.T) {
	e := newEnv(t, time.Hour)
	id := e.create(t, "c", nil)
	e.engine.MuteContainerEvents(true)
	e.view.mu.Lock()
	gen := e.view.gen
	e.view.mu.Unlock()
	stale, err := e.engine.ListContainers(context.Background(), docker.ContainerFilter{})
	assert.NilError(t, err)
	assert.NilError(t, e.view.StartContainer(context.Background(), id))
	// What ListContainers does when its engine call returns: keep only if nothing changed.
	e.view.mu.Lock()
	if e.view.streaming && e.view.gen == gen {
		e.view.list, e.view.listGen, e.view.listAt = stale, gen, time.Now()
	}
	e.view.mu.Unlock()
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Running: true}), 1))
}

// While changes keep coming, a missed list is the engine's answer to the caller's
// filter, and no full list is asked for; once they stop for quiet, the next list is the
// full one again and the lists after it answer from it.
func TestListsWhileChangesComeAreFiltered(t *testing.T) {
	const quiet = 300 * time.Millisecond
	e := newEnvQuiet(t, time.Hour, quiet)
	sb := e.create(t, "sb", map[string]string{"type": "podsandbox"})
	e.create(t, "c", map[string]string{"type": "container", "sandbox": sb})
	assert.NilError(t, e.view.StartContainer(context.Background(), sb))

	calls := e.engineLists()
	running := e.list(t, docker.ContainerFilter{Running: true, Labels: map[string]string{"sandbox": sb}})
	assert.Check(t, is.Len(running, 0), "the sandbox's container is not running")
	sandboxes := e.list(t, docker.ContainerFilter{Labels: map[string]string{"type": "podsandbox"}})
	assert.Check(t, is.Len(sandboxes, 1))
	assert.Check(t, is.Equal(e.engineLists(), calls+2), "each list asked the engine")
	assert.Check(t, is.Equal(e.view.State()["filtered"], uint64(2)))
	assert.Check(t, !e.view.State()["current"].(bool), "no full list was kept")

	time.Sleep(quiet + 50*time.Millisecond)
	e.settle(t) // the full list, kept
	calls = e.engineLists()
	assert.Check(t, is.Len(e.list(t, docker.ContainerFilter{Labels: map[string]string{"type": "podsandbox"}}), 1))
	assert.Check(t, is.Equal(e.engineLists(), calls), "quiet again: answered from the view")
}

func TestSizeAndIDListsGoToTheEngine(t *testing.T) {
	e := newEnv(t, time.Hour)
	id := e.create(t, "c", nil)
	e.settle(t)
	calls := e.engineLists()
	e.list(t, docker.ContainerFilter{Size: true})
	e.list(t, docker.ContainerFilter{ID: id[:12]})
	assert.Check(t, is.Equal(e.engineLists(), calls+2))
}
