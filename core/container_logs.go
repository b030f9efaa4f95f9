package core

import (
	"context"
	"fmt"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// ResumeLogs restarts copying the output of running containers into their CRI log
// files, after this process restarted under them.
func (s *Service) ResumeLogs(ctx context.Context) error {
	if s.cfg.Logs == nil {
		return nil
	}
	cs, err := s.docker.ListContainers(ctx, docker.ContainerFilter{Running: true, Labels: map[string]string{labelContainerType: typeContainer}})
	if err != nil {
		return fmt.Errorf("list running containers: %w", err)
	}
	n := 0
	for _, c := range cs {
		p := c.Labels[labelLogPath]
		if p == "" {
			continue
		}
		if err := s.cfg.Logs.Start(ctx, c.ID, p); err != nil {
			s.logger(ctx).WithError(err).WithField("container", c.ID).Warn("cannot resume container log")
			continue
		}
		n++
	}
	s.logger(ctx).WithField("count", n).Info("resumed container logs")
	return nil
}
