package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveContainer removes a container (forcibly when running). Removing an unknown
// container succeeds, as the CRI asks. Its CRI log file stays for kubelet to clean.
func (s *Service) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	id := req.GetContainerId()
	// One of ours for sure (see Service.created) is removed without an inspect.
	if !s.created.has(id) {
		c, err := s.containerInspect(ctx, id)
		if cerrdefs.IsNotFound(err) {
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		if err != nil {
			return nil, err
		}
		id = c.ID
	}
	if err := s.removeContainer(ctx, id); err != nil {
		return nil, err
	}
	s.logger(ctx).WithField("container", id).Info("container removed")
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// removeContainer stops copying a container's log and removes it from the engine.
func (s *Service) removeContainer(ctx context.Context, id string) (rerr error) {
	if s.deps.NRI != nil {
		if c, err := s.deps.Docker.InspectContainer(ctx, id); err == nil {
			// Its stop first (relayed once), its removal once it is gone.
			pod, ctr := s.nriTarget(ctx, c)
			s.relayStop(ctx, pod, ctr)
			defer func() {
				if rerr != nil {
					return
				}
				if err := s.deps.NRI.RemoveContainer(ctx, pod, ctr); err != nil {
					s.logger(ctx).WithError(err).WithField("container", id).Warn("NRI RemoveContainer failed")
				}
				s.forgetRelayed(stopKey(c.ID))
			}()
		}
	}
	if s.deps.Logs != nil {
		s.deps.Logs.Stop(id)
	}
	if err := ignoreNotFound(s.deps.Docker.RemoveContainer(ctx, id)); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	if s.deps.Logs != nil {
		s.deps.Logs.Forget(id)
	}
	s.created.forget(id)
	return nil
}
