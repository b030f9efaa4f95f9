package core

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// GetContainerEvents streams the lifecycle events of our sandboxes and containers
// (KEP-3386, kubelet's EventedPLEG) from the engine's event stream: each with its pod's
// sandbox status and the statuses of all the pod's containers, from which kubelet
// updates its pod cache without relisting. A sandbox's DELETED event carries its last
// status (kubelet drops the pod from its cache on it). When the engine's stream ends
// (the engine restarts) the RPC ends Unavailable: kubelet relists and subscribes again,
// so that no event is lost in the gap.
func (s *Service) GetContainerEvents(_ *runtimeapi.GetEventsRequest, ss grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	events, errs := s.deps.Docker.ContainerEvents(ctx, time.Now())
	w := &eventWatch{s: s, owners: map[string]string{}, last: map[string]*runtimeapi.PodSandboxStatus{}}
	// Subscribed first, listed second: a container created in between is in both, and
	// one removed in between has its destroy event after the list.
	if err := w.learnOwners(ctx); err != nil {
		return err
	}
	// The headers tell the client that every event from now on reaches it.
	if err := ss.SendHeader(nil); err != nil {
		return err
	}
	sent := 0
	for {
		select {
		case err := <-errs:
			return w.ended(ctx, err, sent)
		case ev, ok := <-events:
			if !ok {
				return w.ended(ctx, <-errs, sent)
			}
			resp := w.event(ctx, ev)
			if resp == nil {
				continue
			}
			if err := ss.Send(resp); err != nil {
				return err
			}
			sent++
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ended is the RPC's end when the engine's event stream ended with err: the client's
// cancellation as it is; anything else Unavailable, so that kubelet relists.
func (w *eventWatch) ended(ctx context.Context, err error, sent int) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	w.s.logger(ctx).WithError(err).WithField("sent", sent).Info("container events: the engine's event stream ended; kubelet relists")
	return fmt.Errorf("container events: the engine's event stream ended (%v); relist and subscribe again: %w", err, cerrdefs.ErrUnavailable)
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

// eventWatch is one GetContainerEvents stream's memory: the sandbox of each of our
// containers (a destroyed one cannot be inspected) and the last status of each sandbox
// (a destroyed sandbox's DELETED event carries it). Both forget what is destroyed.
type eventWatch struct {
	s      *Service
	owners map[string]string // container or sandbox ID -> its sandbox's ID
	last   map[string]*runtimeapi.PodSandboxStatus
}

// learnOwners records the sandbox of every sandbox and container the engine has.
func (w *eventWatch) learnOwners(ctx context.Context) error {
	cs, err := w.s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{})
	if err != nil {
		return fmt.Errorf("container events: list containers: %w", err)
	}
	for _, c := range cs {
		if sb, ok := sandboxOf(c.ID, c.Labels); ok {
			w.owners[c.ID] = sb
		}
	}
	return nil
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
	sandboxID, known := w.owners[ev.ID]
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
		if sandboxID, ok = sandboxOf(d.ID, d.Labels); !ok {
			return nil
		}
		w.owners[ev.ID] = sandboxID
	}
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
		delete(w.owners, ev.ID)
		if ev.ID == sandboxID {
			delete(w.last, sandboxID)
		}
	}
	return resp
}
