package core

import (
	"context"
	"fmt"

	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StartContainer starts a created container and begins copying its output to its
// CRI log file.
func (s *Service) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.containerInspect(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if s.deps.NRI != nil {
		defer s.deps.NRI.BlockSync()()
		pod, ctr := s.nriTarget(ctx, c)
		if err := s.deps.NRI.StartContainer(ctx, pod, ctr); err != nil {
			return nil, nriError("StartContainer", c.ID, err)
		}
		defer func() {
			ctr.State = nriapi.ContainerState_CONTAINER_RUNNING
			if err := s.deps.NRI.PostStartContainer(ctx, pod, ctr); err != nil {
				s.logger(ctx).WithError(err).WithField("container", c.ID).Warn("NRI PostStartContainer failed")
			}
		}()
	}
	if err := s.deps.Docker.StartContainer(ctx, c.ID); err != nil {
		return nil, fmt.Errorf("start container %s: %w", c.ID, err)
	}
	if s.deps.Logs != nil {
		if lf, ok := s.deps.Logs.Recorded(c.ID); ok {
			if err := timed(ctx, "logs.start", func() error { return s.deps.Logs.Start(ctx, c.ID) }); err != nil {
				return nil, fmt.Errorf("container %s started, but its log %s cannot be written: %w", c.ID, lf.Path(), err)
			}
		}
	}
	s.logger(ctx).WithField("container", c.ID).Info("container started")
	return &runtimeapi.StartContainerResponse{}, nil
}
