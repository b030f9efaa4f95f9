package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// errEngineEvents says that the engine's event stream ended (as opposed to the client).
var errEngineEvents = errors.New("the engine's event stream ended")

// eventsRetry bounds the wait between attempts to follow the engine's events again
// after its stream broke (an engine restart).
const eventsRetry = 2 * time.Second

// GetContainerEvents streams the lifecycle events of our sandboxes and containers
// (KEP-3386, kubelet's EventedPLEG) from the engine's event stream, each with its pod's
// sandbox status and the statuses of all the pod's containers; a removed sandbox's
// DELETED event carries its last status. kubelet 1.37 relists a pod on its STOPPED
// events (a fast path beside its relist every second); kubelets 1.26 to 1.36 set their
// pod cache from the statuses. The RPC outlives the engine: when the engine's stream
// breaks, it follows the engine again once it is back and sends, from a fresh list,
// the events of what changed in the gap; ending the RPC instead would spend one of the
// five attempts kubelet makes in its lifetime before it gives up on events.
func (s *Service) GetContainerEvents(_ *runtimeapi.GetEventsRequest, ss grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	sub, unsubscribe := context.WithCancel(ctx)
	w := &eventWatch{s: s, ss: ss, known: map[string]containerSeen{}, last: map[string]*runtimeapi.PodSandboxStatus{}, unsubscribe: unsubscribe}
	events, errs := s.deps.Docker.ContainerEvents(sub, time.Now())
	// Subscribed first, listed second: a container created in between is in both, and
	// one removed in between has its destroy event after the list.
	if err := w.resync(ctx, false); err != nil {
		return err
	}
	// The headers tell the client that every event from now on reaches it.
	if err := ss.SendHeader(nil); err != nil {
		return err
	}
	for {
		err := w.follow(ctx, events, errs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errEngineEvents) {
			return err // the client went away (a failed send)
		}
		s.logger(ctx).WithError(err).WithField("sent", w.sent).Info("container events: the engine's event stream broke; following it again once the engine is back")
		if events, errs, err = w.rejoin(ctx); err != nil {
			return err
		}
	}
}

// containerSeen is what a stream knows of one of our containers or sandboxes.
type containerSeen struct {
	sandbox string // its sandbox (itself for a sandbox)
	running bool
}

// eventWatch is one GetContainerEvents stream: what it knows of each of our containers
// (a destroyed one cannot be inspected; a resync compares with it) and the last status
// of each sandbox (a destroyed sandbox's DELETED event carries it). Both forget what is
// destroyed.
type eventWatch struct {
	s     *Service
	ss    grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]
	known map[string]containerSeen
	last  map[string]*runtimeapi.PodSandboxStatus
	sent  int
	// unsubscribe ends the current engine subscription (the RPC's end ends them all).
	unsubscribe context.CancelFunc
}

// follow sends the CRI events of the engine's until its stream ends (the engine's error)
// or a send fails (that error).
func (w *eventWatch) follow(ctx context.Context, events <-chan docker.ContainerEvent, errs <-chan error) error {
	for {
		select {
		case err := <-errs:
			return fmt.Errorf("%w: %w", errEngineEvents, err)
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("%w: %w", errEngineEvents, <-errs)
			}
			if err := w.send(w.event(ctx, ev)); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// rejoin follows the engine's events again, retrying until the engine answers or ctx
// ends, and sends the events of what changed while the stream was down.
// Each attempt's subscription has a context of its own, ended when the attempt fails,
// so that an engine that streams but cannot list does not pile up subscriptions.
func (w *eventWatch) rejoin(ctx context.Context) (<-chan docker.ContainerEvent, <-chan error, error) {
	for {
		sub, unsubscribe := context.WithCancel(ctx)
		events, errs := w.s.deps.Docker.ContainerEvents(sub, time.Now())
		err := w.resync(ctx, true)
		if err == nil {
			w.unsubscribe() // the broken stream's
			w.unsubscribe = unsubscribe
			return events, errs, nil
		}
		unsubscribe()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if !cerrdefs.IsUnavailable(err) {
			return nil, nil, err
		}
		t := time.NewTimer(eventsRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// resync lists the engine's containers and records ours; with send, it sends an event
// for each difference from what the stream knew: CREATED and STARTED for a new one,
// STARTED or STOPPED for one that changed state, DELETED for one gone.
func (w *eventWatch) resync(ctx context.Context, send bool) error {
	cs, err := w.s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{})
	if err != nil {
		return fmt.Errorf("container events: list containers: %w", err)
	}
	now := time.Now()
	var changes []docker.ContainerEvent
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		sb, ok := sandboxOf(c.ID, c.Labels)
		if !ok {
			continue
		}
		seen[c.ID] = true
		running := c.State == docker.StateRunning
		before, had := w.known[c.ID]
		w.known[c.ID] = containerSeen{sandbox: sb, running: running}
		switch {
		case !had:
			changes = append(changes, docker.ContainerEvent{Action: "create", ID: c.ID, Time: now})
			if running {
				changes = append(changes, docker.ContainerEvent{Action: "start", ID: c.ID, Time: now})
			}
		case running && !before.running:
			changes = append(changes, docker.ContainerEvent{Action: "start", ID: c.ID, Time: now})
		case !running && before.running:
			changes = append(changes, docker.ContainerEvent{Action: "die", ID: c.ID, Time: now})
		}
	}
	var gone []string
	for id := range w.known {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	sort.Slice(gone, func(i, j int) bool { // containers before their sandbox
		return w.known[gone[i]].sandbox != gone[i] && w.known[gone[j]].sandbox == gone[j]
	})
	for _, id := range gone {
		changes = append(changes, docker.ContainerEvent{Action: "destroy", ID: id, Time: now})
	}
	if !send {
		return nil
	}
	if len(changes) > 0 {
		w.s.logger(ctx).WithField("changes", len(changes)).Info("container events: sending what changed while the engine's stream was down")
	}
	for _, ev := range changes {
		if err := w.send(w.event(ctx, ev)); err != nil {
			return err
		}
	}
	return nil
}

// send sends resp (nil: nothing).
func (w *eventWatch) send(resp *runtimeapi.ContainerEventResponse) error {
	if resp == nil {
		return nil
	}
	if err := w.ss.Send(resp); err != nil {
		return err
	}
	w.sent++
	return nil
}

// criEventType maps an engine container action to a CRI event type; false for the
// actions kubelet has no event for (exec_*, kill, oom, rename, ...).
func criEventType(action string) (runtimeapi.ContainerEventType, bool) {
	switch action {
	case "create":
		return runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, true
	case "start":
		return runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, true
	case "die":
		return runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, true
	case "destroy":
		return runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, true
	}
	return 0, false
}

// sandboxOf returns the sandbox a container with labels belongs to (itself for a
// sandbox); false when it is none of ours.
func sandboxOf(id string, labels map[string]string) (string, bool) {
	switch labels[labelContainerType] {
	case typeSandbox:
		return id, true
	case typeContainer:
		return labels[labelSandboxID], labels[labelSandboxID] != ""
	}
	return "", false
}

// event turns an engine event into the CRI's, or nil when kubelet has no use for it
// (not ours, an action without a CRI event, a container already gone).
func (w *eventWatch) event(ctx context.Context, ev docker.ContainerEvent) *runtimeapi.ContainerEventResponse {
	typ, ok := criEventType(ev.Action)
	if !ok {
		return nil
	}
	log := w.s.logger(ctx).WithField("container", ev.ID).WithField("action", ev.Action)
	seen, known := w.known[ev.ID]
	if !known {
		if typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
			return nil // not one of ours (or destroyed before we listed)
		}
		d, err := w.s.deps.Docker.InspectContainer(ctx, ev.ID)
		if err != nil {
			if !cerrdefs.IsNotFound(err) {
				log.WithError(err).Warn("container events: cannot inspect the container; kubelet sees it at its next relist")
			}
			return nil // removed already: its destroy event follows
		}
		if seen.sandbox, ok = sandboxOf(d.ID, d.Labels); !ok {
			return nil
		}
	}
	seen.running = typ == runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT ||
		(seen.running && typ == runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	w.known[ev.ID] = seen
	sandboxID := seen.sandbox
	resp := &runtimeapi.ContainerEventResponse{ContainerId: ev.ID, ContainerEventType: typ, CreatedAt: ev.Time.UnixNano()}
	st, err := w.s.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	switch {
	case err == nil:
		resp.PodSandboxStatus = st.GetStatus()
		w.last[sandboxID] = st.GetStatus()
	case cerrdefs.IsNotFound(err):
		resp.PodSandboxStatus = w.last[sandboxID] // gone: its last status, which kubelet needs to drop it
	default:
		log.WithError(err).Warn("container events: cannot read the pod's sandbox status; sending its last one")
		resp.PodSandboxStatus = w.last[sandboxID]
	}
	cs, err := w.s.listContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandboxID})
	if err != nil {
		log.WithError(err).Warn("container events: cannot list the pod's containers")
	}
	for _, c := range cs {
		st, err := w.s.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.engine.ID})
		if err != nil {
			continue // removed meanwhile (its own event follows) or hidden
		}
		resp.ContainersStatuses = append(resp.ContainersStatuses, st.GetStatus())
	}
	if typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		delete(w.known, ev.ID)
		if ev.ID == sandboxID {
			delete(w.last, sandboxID)
		}
	}
	return resp
}
