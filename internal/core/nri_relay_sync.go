package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// NRIState returns the pods and containers a newly connected NRI plugin is
// synchronised with: every sandbox and container of the engine that the CRI shows.
func (s *Service) NRIState(ctx context.Context) ([]*nriapi.PodSandbox, []*nriapi.Container, error) {
	sbs, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelContainerType: typeSandbox}})
	if err != nil {
		return nil, nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	cs, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelContainerType: typeContainer}})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}
	pods := make([]*nriapi.PodSandbox, 0, len(sbs))
	for _, c := range sbs {
		sb, err := s.deps.Docker.InspectContainer(ctx, c.ID)
		if err != nil || s.hidden(c.ID) {
			continue // gone since the list, or not made yet
		}
		ips, _ := s.sandboxIPs(ctx, sb)
		pods = append(pods, nriPod(sb, ips))
	}
	ctrs := make([]*nriapi.Container, 0, len(cs))
	for _, c := range cs {
		d, err := s.deps.Docker.InspectContainer(ctx, c.ID)
		if err != nil || s.hidden(c.ID) {
			continue
		}
		ctrs = append(ctrs, nriContainer(d))
	}
	return pods, ctrs, nil
}

// NRIUpdate applies container updates NRI plugins ask for (unsolicited, in
// Synchronize, or as a side effect of another container's event): the resources the
// engine updates in place. It returns the updates that failed.
func (s *Service) NRIUpdate(ctx context.Context, updates []*nriapi.ContainerUpdate) ([]*nriapi.ContainerUpdate, error) {
	var failed []*nriapi.ContainerUpdate
	var errs []error
	for _, u := range updates {
		if err := s.nriUpdateOne(ctx, u); err != nil {
			s.logger(ctx).WithError(err).WithField("container", u.GetContainerId()).Warn("NRI container update failed")
			if !u.GetIgnoreFailure() {
				failed = append(failed, u)
				errs = append(errs, err)
			}
		}
	}
	return failed, errors.Join(errs...)
}

func (s *Service) nriUpdateOne(ctx context.Context, u *nriapi.ContainerUpdate) error {
	c, err := s.containerInspect(ctx, u.GetContainerId())
	if err != nil {
		return err
	}
	r := u.GetLinux().GetResources()
	if r == nil {
		return nil
	}
	res := c.Resources
	var refused []string
	adjustResources(&res, r, "linux.resources.", func(what, why string) { refused = append(refused, what+" ("+why+")") })
	if len(refused) > 0 {
		return fmt.Errorf("update of container %s: NRI plugins asked for what Docker Engine cannot express: %s", c.ID, strings.Join(refused, "; "))
	}
	return s.deps.Docker.UpdateContainerResources(ctx, c.ID, res)
}

// relayStop tells the plugins that container ctr stopped, once per container.
func (s *Service) relayStop(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) {
	s.relayOnce(ctx, stopKey(ctr.GetId()), func() {
		ctr.State = nriapi.ContainerState_CONTAINER_STOPPED
		resp, err := s.deps.NRI.StopContainer(ctx, pod, ctr)
		if err != nil {
			s.logger(ctx).WithError(err).WithField("container", ctr.GetId()).Warn("NRI StopContainer failed")
			return
		}
		s.applyNRIEffects(ctx, resp.GetUpdate(), nil)
	})
}

// relayPodStop tells the plugins that pod stopped (its containers are), once per pod.
func (s *Service) relayPodStop(ctx context.Context, pod *nriapi.PodSandbox) {
	s.relayOnce(ctx, podStopKey(pod.GetId()), func() {
		if err := s.deps.NRI.StopPodSandbox(ctx, pod); err != nil {
			s.logger(ctx).WithError(err).WithField("sandbox", pod.GetId()).Warn("NRI StopPodSandbox failed")
		}
	})
}

// exitRelayTimeout bounds the relay of one container's exit.
const exitRelayTimeout = time.Minute

// WatchNRIExits relays to the NRI plugins the stop of every container that exits on
// its own (no StopContainer asked for it), until ctx ends; it returns at once when
// NRI is off. A broken event stream is reopened.
func (s *Service) WatchNRIExits(ctx context.Context) {
	if s.deps.NRI == nil {
		return
	}
	sweep := time.NewTicker(relayedSweepInterval)
	defer sweep.Stop()
	for ctx.Err() == nil {
		exits, errs := s.deps.Docker.ContainerExits(ctx)
	stream:
		for {
			select {
			case <-sweep.C:
				s.sweepRelayed(ctx)
			case id, ok := <-exits:
				if !ok {
					break stream
				}
				s.relayExit(ctx, id)
			case err := <-errs:
				if ctx.Err() == nil {
					s.log.WithError(err).Warn("container exit events broke off; reopening")
				}
				break stream
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// relayedSweepInterval is how often the stops relayed for containers that are gone
// are forgotten.
const relayedSweepInterval = 10 * time.Minute

// sweepRelayed forgets the relayed stops of containers the engine no longer has: one
// removed outside the CRI (docker rm, a prune) never reaches RemoveContainer, which
// forgets the others, and its entry would stay for the life of the process.
func (s *Service) sweepRelayed(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, exitRelayTimeout)
	defer cancel()
	cs, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{})
	if err != nil {
		s.log.WithError(err).Debug("NRI: cannot list containers to forget the relayed stops of those gone; next time")
		return
	}
	present := make(map[string]bool, len(cs))
	for _, c := range cs {
		present[stopKey(c.ID)], present[podStopKey(c.ID)] = true, true
	}
	s.nriState.mu.Lock()
	defer s.nriState.mu.Unlock()
	for key, done := range s.nriState.relayed {
		select {
		case <-done: // finished: a relay still running is left alone
			if !present[key] {
				delete(s.nriState.relayed, key)
			}
		default:
		}
	}
}

func (s *Service) relayExit(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, exitRelayTimeout)
	defer cancel()
	c, err := s.deps.Docker.InspectContainer(ctx, id)
	if err != nil || c.Labels[labelContainerType] != typeContainer || s.hidden(c.ID) {
		return // gone (removed: its stop was relayed then), a sandbox, or not made yet
	}
	pod, ctr := s.nriTarget(ctx, c)
	s.relayStop(ctx, pod, ctr)
}

// nriUpdateResources asks the NRI plugins about a resource update of container c
// (CRI resources r, engine resources res) and returns the resources to apply: res as
// the plugins adjusted it. Their updates of other containers are applied too.
func (s *Service) nriUpdateResources(ctx context.Context, c docker.ContainerDetails, r *runtimeapi.LinuxContainerResources, res docker.Resources) (docker.Resources, error) {
	pod, ctr := s.nriTarget(ctx, c)
	resp, err := s.deps.NRI.UpdateContainer(ctx, pod, ctr, nriCRIResources(r))
	if err != nil {
		return res, nriError("UpdateContainer", c.ID, err)
	}
	var others []*nriapi.ContainerUpdate
	for _, u := range resp.GetUpdate() {
		if u == nil {
			continue // the library's slot for the target when no plugin adjusted it
		}
		if u.GetContainerId() != c.ID {
			others = append(others, u)
			continue
		}
		if u.GetLinux().GetResources() == nil {
			continue
		}
		want := u.GetLinux().GetResources().Copy()
		if maps.Equal(want.GetUnified(), r.GetUnified()) {
			want.Unified = nil // as asked: applied (or refused) by the CRI mapping already
		}
		if len(want.GetHugepageLimits()) == len(r.GetHugepageLimits()) {
			want.HugepageLimits = nil
		}
		var refused []string
		adjustResources(&res, want, "linux.resources.", func(what, why string) { refused = append(refused, what+" ("+why+")") })
		if len(refused) > 0 {
			return res, fmt.Errorf("update resources of container %s: NRI plugins asked for what Docker Engine cannot express: %s: %w",
				c.ID, strings.Join(refused, "; "), cerrdefs.ErrFailedPrecondition)
		}
	}
	s.applyNRIEffects(ctx, others, resp.GetEvict())
	return res, nil
}
