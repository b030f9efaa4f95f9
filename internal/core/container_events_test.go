package core

import (
	"context"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// eventSink is a GetContainerEvents stream whose events arrive on a channel.
type eventSink struct {
	grpc.ServerStream
	ctx context.Context
	ch  chan *runtimeapi.ContainerEventResponse
}

func (s *eventSink) Context() context.Context { return s.ctx }

func (s *eventSink) SendHeader(metadata.MD) error { return nil }

func (s *eventSink) Send(m *runtimeapi.ContainerEventResponse) error {
	s.ch <- m
	return nil
}

// subscribe runs GetContainerEvents until the test ends; the RPC's result arrives on done.
func subscribe(t *testing.T, env *rtEnv) (events chan *runtimeapi.ContainerEventResponse, done chan error, cancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sink := &eventSink{ctx: ctx, ch: make(chan *runtimeapi.ContainerEventResponse, 100)}
	done = make(chan error, 1)
	sent := env.engine.ContainerEventsSent()
	go func() { done <- env.svc.GetContainerEvents(&runtimeapi.GetEventsRequest{}, sink) }()
	// Subscribed once an event published now reaches it: a foreign container's.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		env.engine.PublishContainerEvent("exec_start", "probe")
		if env.engine.ContainerEventsSent() > sent+1 {
			return poll.Success()
		}
		return poll.Continue("not subscribed")
	}, poll.WithDelay(5*time.Millisecond))
	return sink.ch, done, cancel
}

// next returns the next event, failing after a few seconds without one.
func next(t *testing.T, events chan *runtimeapi.ContainerEventResponse) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no container event")
		return nil
	}
}

func statusOf(ev *runtimeapi.ContainerEventResponse, id string) *runtimeapi.ContainerStatus {
	for _, st := range ev.ContainersStatuses {
		if st.Id == id {
			return st
		}
	}
	return nil
}

// TestGetContainerEvents follows a pod's life: each event of its sandbox and container,
// in order, carries the pod's sandbox status (its UID, which kubelet keys its cache by)
// and the statuses of the pod's containers as they are after the event; the sandbox's
// DELETED event carries its last status. Exec events and foreign containers send nothing.
func TestGetContainerEvents(t *testing.T) {
	env := newRTEnv(t)
	events, done, cancel := subscribe(t, env)
	ctx := context.Background()
	typeOf := func(ev *runtimeapi.ContainerEventResponse) runtimeapi.ContainerEventType {
		return ev.ContainerEventType
	}

	cfg := rtSandboxConfig("web")
	sb := env.runSandbox(t, cfg)
	ev := next(t, events)
	assert.Equal(t, ev.ContainerId, sb)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	assert.Equal(t, ev.GetPodSandboxStatus().GetMetadata().GetUid(), cfg.Metadata.Uid)
	ev = next(t, events)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	assert.Check(t, ev.CreatedAt > 0)

	cid := env.createContainer(t, sb, cfg, rtContainerConfig("app"))
	ev = next(t, events)
	assert.Equal(t, ev.ContainerId, cid)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	assert.Equal(t, ev.GetPodSandboxStatus().GetId(), sb)
	assert.Equal(t, statusOf(ev, cid).GetState(), runtimeapi.ContainerState_CONTAINER_CREATED)

	env.engine.PublishContainerEvent("exec_start", cid) // a probe: no CRI event
	_, err := env.engine.CreateContainer(ctx, docker.ContainerSpec{Name: "plain", Image: rtContainerImage})
	assert.NilError(t, err) // not ours: no CRI event

	env.startContainer(t, cid)
	ev = next(t, events)
	assert.Equal(t, ev.ContainerId, cid)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	assert.Equal(t, statusOf(ev, cid).GetState(), runtimeapi.ContainerState_CONTAINER_RUNNING)
	assert.Equal(t, ev.GetPodSandboxStatus().GetState(), runtimeapi.PodSandboxState_SANDBOX_READY)

	assert.NilError(t, stopContainer(env, cid, 0))
	ev = next(t, events)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	assert.Equal(t, statusOf(ev, cid).GetState(), runtimeapi.ContainerState_CONTAINER_EXITED)

	_, err = env.svc.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
	ev = next(t, events)
	assert.Equal(t, ev.ContainerId, cid)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	assert.Check(t, statusOf(ev, cid) == nil, "a removed container has no status")
	assert.Equal(t, ev.GetPodSandboxStatus().GetId(), sb)

	_, err = env.svc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	assert.NilError(t, err)
	ev = next(t, events)
	assert.Equal(t, ev.ContainerId, sb)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	assert.Equal(t, ev.GetPodSandboxStatus().GetState(), runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	_, err = env.svc.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	assert.NilError(t, err)
	ev = next(t, events)
	assert.Equal(t, ev.ContainerId, sb)
	assert.Equal(t, typeOf(ev), runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	assert.Equal(t, ev.GetPodSandboxStatus().GetId(), sb, "its last status: kubelet drops the pod on it")
	assert.Equal(t, ev.GetPodSandboxStatus().GetMetadata().GetUid(), cfg.Metadata.Uid)

	select {
	case ev := <-events:
		t.Fatalf("an event too many: %v", ev)
	default:
	}
	cancel()
	assert.Check(t, is.ErrorIs(<-done, context.Canceled))
}

// A sandbox and container that exist before the subscription are known by their
// sandbox when they go (a destroyed container cannot be inspected).
func TestGetContainerEventsKnowsEarlierContainers(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	sb := env.runSandbox(t, cfg)
	cid := env.exitedContainer(t, sb, cfg, "app")
	events, _, _ := subscribe(t, env)
	_, err := env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
	ev := next(t, events)
	assert.Equal(t, ev.ContainerId, cid)
	assert.Equal(t, ev.ContainerEventType, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	assert.Equal(t, ev.GetPodSandboxStatus().GetId(), sb)
}

// When the engine's event stream breaks (a restart) the RPC goes on: it follows the
// engine again once the engine answers and sends, from a fresh list, the events of
// what changed in the gap. An engine that cannot list fails a new RPC at once.
func TestGetContainerEventsEngineRestart(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	sb := env.runSandbox(t, cfg)
	stopped := env.runContainer(t, sb, cfg, "stopped")
	removed := env.exitedContainer(t, sb, cfg, "removed")
	events, done, _ := subscribe(t, env)

	env.engine.InjectError("ContainerEvents", cerrdefs.ErrUnavailable)
	env.engine.InjectError("ListContainers", cerrdefs.ErrUnavailable)
	env.engine.BreakEvents(cerrdefs.ErrUnavailable)
	// Behind the stream's back: a container stops, one is removed, one is created.
	assert.NilError(t, stopContainer(env, stopped, 0))
	_, err := env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: removed})
	assert.NilError(t, err)
	created := env.createContainer(t, sb, cfg, rtContainerConfig("created"))
	time.Sleep(eventsRetry + 500*time.Millisecond) // an attempt fails meanwhile
	select {
	case err := <-done:
		t.Fatalf("the RPC ended with the engine's stream: %v", err)
	default:
	}
	env.engine.InjectError("ContainerEvents", nil)
	env.engine.InjectError("ListContainers", nil)

	got := map[string]runtimeapi.ContainerEventType{}
	for range 3 {
		ev := next(t, events)
		got[ev.ContainerId] = ev.ContainerEventType
		assert.Check(t, is.Equal(ev.GetPodSandboxStatus().GetId(), sb))
	}
	assert.DeepEqual(t, got, map[string]runtimeapi.ContainerEventType{
		stopped: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		removed: runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
		created: runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
	})
	// Followed again: a start reaches the stream.
	env.startContainer(t, created)
	ev := next(t, events)
	assert.Check(t, is.Equal(ev.ContainerId, created))
	assert.Check(t, is.Equal(ev.ContainerEventType, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT))

	env.engine.InjectError("ListContainers", cerrdefs.ErrUnavailable)
	sink := &eventSink{ctx: context.Background(), ch: make(chan *runtimeapi.ContainerEventResponse, 1)}
	err = env.svc.GetContainerEvents(&runtimeapi.GetEventsRequest{}, sink)
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}
