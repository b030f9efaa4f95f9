package core

import (
	"context"
	"fmt"
	"reflect"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// createAdjusted creates the engine container of spec (CRI config cfg) in sandbox sb
// with the NRI plugins' adjustments, and returns it with the function that shows it
// to the CRI (it stays hidden until then: the caller's work is not done).
//
// Plugins are asked with the container's ID, which the engine picks at creation: so
// the container is created first, as asked, then the plugins are asked. When their
// adjustment is only resources the engine updates in place, they are applied so.
// Otherwise the engine cannot change the created container: it is removed (relayed
// to the plugins as a removal), a container with the adjusted config is created and
// the plugins asked again for it; they must answer the same (a deterministic
// plugin does), or the create fails rather than run a container they did not agree
// to. A plugin's error, or an adjustment the engine cannot express, fails the create
// with nothing left behind.
func (s *Service) createAdjusted(ctx context.Context, sb docker.ContainerDetails, cfg *runtimeapi.ContainerConfig, spec docker.ContainerSpec) (string, func(), error) {
	if s.deps.NRI == nil {
		id, err := s.createContainer(ctx, spec)
		return id, func() {}, err
	}
	pod := nriPod(sb, nil)
	cur := spec
	for attempt := 0; ; attempt++ {
		id, err := s.createContainer(ctx, cur)
		if err != nil {
			return "", nil, err
		}
		show := s.hide(id)
		ctr := nriContainerOfSpec(id, sb.ID, cfg, spec)
		fail := func(err error) (string, func(), error) {
			s.undoCreate(ctx, pod, ctr)
			show()
			return "", nil, err
		}
		resp, err := s.deps.NRI.CreateContainer(ctx, pod, ctr)
		if err != nil {
			return fail(nriError("CreateContainer", id, err))
		}
		adjusted, err := adjustSpec(spec, resp.GetAdjust())
		if err != nil {
			return fail(err)
		}
		if inPlace(cur, adjusted) {
			if !reflect.DeepEqual(cur.Resources, adjusted.Resources) {
				if err := s.deps.Docker.UpdateContainerResources(ctx, id, adjusted.Resources); err != nil {
					return fail(fmt.Errorf("apply the NRI plugins' resources to container %s: %w", id, err))
				}
			}
			s.applyNRIEffects(ctx, resp.GetUpdate(), resp.GetEvict())
			return id, show, nil
		}
		if attempt > 0 {
			return fail(fmt.Errorf("NRI plugins adjusted it differently when asked again for the container made with their adjustments: %w",
				cerrdefs.ErrFailedPrecondition))
		}
		s.logger(ctx).WithField("container", id).Info("NRI plugins adjusted the container's config: creating it again with their adjustments")
		s.undoCreate(ctx, pod, ctr)
		show()
		cur = adjusted
	}
}

// undoCreate removes a container whose creation failed or is redone, telling the
// plugins that saw it; it outlives the request as RunPodSandbox's undo does.
func (s *Service) undoCreate(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if err := ignoreNotFound(s.deps.Docker.RemoveContainer(cctx, ctr.GetId())); err != nil {
		s.logger(ctx).WithError(err).WithField("container", ctr.GetId()).Warn("cannot remove the container whose creation failed")
	}
	if err := s.deps.NRI.RemoveContainer(cctx, pod, ctr); err != nil {
		s.logger(ctx).WithError(err).WithField("container", ctr.GetId()).Warn("NRI RemoveContainer of a container whose creation failed")
	}
}

// applyNRIEffects applies the updates plugins asked for other containers and stops
// the containers they evict, logging what fails (the event that caused them stands).
func (s *Service) applyNRIEffects(ctx context.Context, updates []*nriapi.ContainerUpdate, evict []*nriapi.ContainerEviction) {
	log := s.logger(ctx)
	if failed, _ := s.NRIUpdate(ctx, updates); len(failed) > 0 {
		log.WithField("failed", len(failed)).Warn("NRI plugins' container updates failed")
	}
	for _, e := range evict {
		log.WithField("container", e.GetContainerId()).WithField("reason", e.GetReason()).Warn("NRI plugin evicts container: stopping it")
		if err := ignoreNotFound(s.deps.Docker.StopContainer(ctx, e.GetContainerId(), 0)); err != nil {
			log.WithError(err).WithField("container", e.GetContainerId()).Warn("cannot stop the container an NRI plugin evicts")
		}
	}
}
