package core

import (
	"context"
	"fmt"
	"os"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// ResumeLogs restarts copying container output into CRI log files after this process
// restarted under running pods: for running containers, and for containers that
// exited while it was down and whose log file kubelet still has (their last lines,
// e.g. a termination message kubelet reads from the log). Each copy resumes after the
// last line its file holds, so nothing is written twice.
func (s *Service) ResumeLogs(ctx context.Context) error {
	if s.deps.Logs == nil {
		return nil
	}
	cs, err := s.docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelContainerType: typeContainer}})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	n := 0
	for _, c := range cs {
		p := c.Labels[labelLogPath]
		if p == "" {
			continue
		}
		if c.State != docker.StateRunning {
			if _, err := os.Stat(p); err != nil {
				continue // never started, or kubelet removed its log: nothing to finish
			}
		}
		if err := s.deps.Logs.Start(ctx, c.ID, p); err != nil {
			s.logger(ctx).WithError(err).WithField("container", c.ID).Warn("cannot resume container log")
			continue
		}
		n++
	}
	s.logger(ctx).WithField("count", n).Info("resumed container logs")
	return nil
}
