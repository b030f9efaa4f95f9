//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventLine is one CRI container event as the test checks it.
type eventLine struct {
	id  string
	typ runtimeapi.ContainerEventType
}

// watchEvents subscribes to GetContainerEvents: its events arrive on the channel, the
// stream's end on done.
func watchEvents(t *testing.T, s *shim) (chan *runtimeapi.ContainerEventResponse, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := s.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	assert.NilError(t, err)
	_, err = stream.Header() // sent once every later event reaches the stream
	assert.NilError(t, err)
	events, done := make(chan *runtimeapi.ContainerEventResponse, 100), make(chan error, 1)
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				done <- err
				return
			}
			events <- ev
		}
	}()
	return events, done
}

// nextEvent waits for the next event.
func nextEvent(t *testing.T, events chan *runtimeapi.ContainerEventResponse) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no container event within 30 s")
		return nil
	}
}

// TestContainerEvents: on the real engine, GetContainerEvents (kubelet's EventedPLEG)
// reports a pod's life in order, each event with the pod's sandbox status (its UID) and
// its containers' statuses; the sandbox's DELETED event carries its last status. The
// stream outlives an engine restart and reports what changed while the engine was down.
func TestContainerEvents(t *testing.T) {
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	ctx := context.Background()
	events, done := watchEvents(t, s)
	pod := podConfig("events")
	var podID, cid string
	// expect reads the events that step causes: of the pod's sandbox or container, with
	// the pod's sandbox status (its UID) and, after the step, the container in the state given.
	expect := func(step func(), state runtimeapi.ContainerState, lines func() []eventLine) {
		t.Helper()
		step()
		want := lines()
		var got []eventLine
		for len(got) < len(want) {
			ev := nextEvent(t, events)
			got = append(got, eventLine{ev.ContainerId, ev.ContainerEventType})
			assert.Check(t, is.Equal(ev.GetPodSandboxStatus().GetId(), podID), "event %v", ev)
			assert.Check(t, is.Equal(ev.GetPodSandboxStatus().GetMetadata().GetUid(), pod.Metadata.Uid))
			assert.Check(t, ev.CreatedAt > 0)
			if ev.ContainerId == cid && state != runtimeapi.ContainerState_CONTAINER_UNKNOWN && len(got) == len(want) {
				assert.Check(t, is.Len(ev.ContainersStatuses, 1))
				if len(ev.ContainersStatuses) == 1 {
					assert.Check(t, is.Equal(ev.ContainersStatuses[0].GetState(), state))
				}
			}
		}
		assert.Check(t, is.DeepEqual(got, want, cmp.AllowUnexported(eventLine{})))
	}
	created, started := runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	stopped, deleted := runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	expect(func() { podID = runPod(t, s, pod) }, runtimeapi.ContainerState_CONTAINER_UNKNOWN, func() []eventLine { return []eventLine{{podID, created}, {podID, started}} })
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: pauseRef},
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
	expect(func() {
		resp, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg, SandboxConfig: pod})
		assert.NilError(t, err)
		cid = resp.ContainerId
	}, runtimeapi.ContainerState_CONTAINER_CREATED, func() []eventLine { return []eventLine{{cid, created}} })
	expect(func() {
		_, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cid})
		assert.NilError(t, err)
	}, runtimeapi.ContainerState_CONTAINER_RUNNING, func() []eventLine { return []eventLine{{cid, started}} })
	expect(func() {
		_, err := s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cid, Timeout: 1})
		assert.NilError(t, err)
	}, runtimeapi.ContainerState_CONTAINER_EXITED, func() []eventLine { return []eventLine{{cid, stopped}} })
	expect(func() {
		_, err := s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cid})
		assert.NilError(t, err)
	}, runtimeapi.ContainerState_CONTAINER_UNKNOWN, func() []eventLine { return []eventLine{{cid, deleted}} })
	expect(func() { stopAndRemovePod(t, s, podID) }, runtimeapi.ContainerState_CONTAINER_UNKNOWN, func() []eventLine { return []eventLine{{podID, stopped}, {podID, deleted}} })

	// The engine restarts (its containers live on: live-restore) and a container's
	// process is killed while it is down: the same stream goes on and reports the
	// container stopped once the engine is back.
	pod = podConfig("events-restart")
	podID = runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	cid = startContainer(t, s, podID, pod, cfg)
	pid := strings.TrimSpace(docker(t, "inspect", "-f", "{{.State.Pid}}", cid))
	for len(events) > 0 {
		<-events // the new pod's events
	}
	_, err := hackOutput("engine.sh", "stop-dockerd")
	assert.NilError(t, err)
	restarted := false
	defer func() {
		if !restarted {
			_, _ = hackOutput("engine.sh", "start-dockerd")
		}
	}()
	_, err = execOutput("kill", "-9", pid)
	assert.NilError(t, err)
	time.Sleep(time.Second)
	_, err = hackOutput("engine.sh", "start-dockerd")
	assert.NilError(t, err)
	restarted = true
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		select {
		case err := <-done:
			return poll.Error(fmt.Errorf("the stream ended: %w", err))
		case ev := <-events:
			if ev.ContainerId == cid && ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				return poll.Success()
			}
			return poll.Continue("event %s %s", ev.ContainerId, ev.ContainerEventType)
		default:
			return poll.Continue("no STOPPED event for %s yet", cid)
		}
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(100*time.Millisecond))
	assert.Check(t, strings.Contains(s.log(t), "the engine's event stream broke"), "the break is logged")
}
