package core

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// ListPodSandbox lists sandboxes. Without a filter it also lists sandboxes known only
// by their checkpoint, as NOTREADY, so that kubelet cleans them up, and deletes
// checkpoints that fail verification, as upstream does.
func (s *Service) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	lf := docker.ContainerFilter{ID: f.GetId(), Labels: map[string]string{}}
	for k, v := range f.GetLabelSelector() {
		lf.Labels[k] = v
	}
	lf.Labels[labelContainerType] = typeSandbox
	if f.GetState() != nil && f.GetState().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		lf.Running = true
	}
	// Checkpoints first: a sandbox being created appears as its container and then its
	// checkpoint, so a checkpoint listed before the containers is never mistaken for an
	// orphan of a container listed after it.
	var checkpoints []string
	if f == nil {
		checkpoints = s.listCheckpoints(ctx)
	}
	cs, err := s.deps.Docker.ListContainers(ctx, lf)
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	out := make([]*runtimeapi.PodSandbox, 0, len(cs))
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		seen[c.ID] = true
		if s.hidden(c.ID) {
			continue // its NRI plugins have not run it yet
		}
		md, err := sandboxMetadata(c)
		if err != nil {
			s.logger(ctx).WithError(err).Debug("skipping container that looks like a sandbox")
			continue
		}
		state := stateOfSandbox(c.State)
		if f.GetState() != nil && f.GetState().GetState() != state {
			continue
		}
		labels, annotations := splitLabels(c.Labels)
		out = append(out, &runtimeapi.PodSandbox{
			Id: c.ID, Metadata: md, State: state, CreatedAt: c.Created.UnixNano(),
			Labels: labels, Annotations: annotations,
		})
	}
	out = append(out, s.checkpointOnlySandboxes(ctx, checkpoints, seen)...)
	s.logger(ctx).WithField("count", len(out)).Debug("listed pod sandboxes")
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

// listCheckpoints returns the ids of the sandbox checkpoints (none when they cannot
// be listed: ListPodSandbox still lists the engine's sandboxes).
func (s *Service) listCheckpoints(ctx context.Context) []string {
	ids, err := s.deps.Checkpoints.List()
	if err != nil {
		s.logger(ctx).WithError(err).Warn("cannot list sandbox checkpoints")
	}
	return ids
}

// checkpointOnlySandboxes returns the sandboxes whose checkpoint (among ids) outlived
// their container, as NOTREADY, and deletes checkpoints that fail verification.
func (s *Service) checkpointOnlySandboxes(ctx context.Context, ids []string, seen map[string]bool) []*runtimeapi.PodSandbox {
	log := s.logger(ctx)
	var out []*runtimeapi.PodSandbox
	for _, id := range ids {
		if seen[id] || strings.HasPrefix(id, ".") {
			continue
		}
		cp, err := s.deps.Checkpoints.Read(id)
		if cerrdefs.IsDataLoss(err) {
			log.WithError(err).WithField("sandbox", id).Warn("removing corrupt sandbox checkpoint")
			if err := s.deps.Checkpoints.Remove(id); err != nil {
				log.WithError(err).Warn("cannot remove corrupt sandbox checkpoint")
			}
			continue
		}
		if err != nil {
			log.WithError(err).WithField("sandbox", id).Warn("cannot read sandbox checkpoint")
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:       id,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: cp.Name, Namespace: cp.Namespace},
			State:    runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		})
	}
	return out
}
