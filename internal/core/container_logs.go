package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
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
	cs, err := s.deps.Docker.ListContainers(ctx, docker.ContainerFilter{Labels: map[string]string{labelContainerType: typeContainer}})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	n := 0
	adopt := s.deps.Logs.AdoptsLabels()
	for _, c := range cs {
		lf, ok := s.deps.Logs.Recorded(c.ID)
		if !ok && adopt {
			lf, ok = s.adoptLogFile(ctx, c)
		}
		if !ok {
			continue // no log, or not created by us (upstream's link to the engine's log stays)
		}
		if c.State != docker.StateRunning {
			if _, err := os.Stat(lf.Path()); err != nil {
				continue // never started, or kubelet removed its log: nothing to finish
			}
		}
		if err := s.deps.Logs.Start(ctx, c.ID); err != nil {
			s.logger(ctx).WithError(err).WithField("container", c.ID).Warn("cannot resume container log")
			continue
		}
		n++
	}
	s.logger(ctx).WithField("count", n).Info("resumed container logs")
	return nil
}

// kubeletLogLayout is the end of a container log path in kubelet's layout:
// "<namespace>_<pod>_<uid>/<container>/<attempt>.log".
var kubeletLogLayout = regexp.MustCompile(`/[^/_]+_[^/_]+_[^/_]+/[^/]+/[0-9]+\.log$`)

// adoptLogFile records the log file of a container created by an earlier version of
// this binary, which recorded nothing, from its log path label, when the path has
// kubelet's layout (nothing else is ever written to). It is used once, on the first
// start with records (AdoptsLabels); later, labels are never trusted for log paths.
func (s *Service) adoptLogFile(ctx context.Context, c docker.Container) (logs.LogFile, bool) {
	p := c.Labels[labelLogPath]
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || !kubeletLogLayout.MatchString(p) {
		if p != "" {
			s.logger(ctx).WithField("container", c.ID).WithField("log_path", p).
				Warn("not adopting a container log path that is not in kubelet's layout")
		}
		return logs.LogFile{}, false
	}
	ctrDir := filepath.Dir(p)
	lf := logs.LogFile{Dir: filepath.Dir(ctrDir), Name: filepath.Join(filepath.Base(ctrDir), filepath.Base(p))}
	if err := s.deps.Logs.Record(c.ID, lf); err != nil {
		s.logger(ctx).WithError(err).WithField("container", c.ID).Warn("cannot adopt the container's log file")
		return logs.LogFile{}, false
	}
	s.logger(ctx).WithField("container", c.ID).WithField("log_path", lf.Path()).Info("adopted the log file of a container created before log records")
	return lf, true
}
