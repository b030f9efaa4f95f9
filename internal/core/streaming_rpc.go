package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// streamer returns the streaming server, Unimplemented without one.
func (s *Service) streamer() (Streamer, error) {
	if s.deps.Streaming == nil {
		return nil, fmt.Errorf("streaming is not enabled: %w", cerrdefs.ErrNotImplemented)
	}
	return s.deps.Streaming, nil
}

// runningContainer returns container id when it runs; FailedPrecondition otherwise.
func (s *Service) runningContainer(ctx context.Context, id string) (docker.ContainerDetails, error) {
	c, err := s.containerInspect(ctx, id)
	if err != nil {
		return c, err
	}
	if c.State != docker.StateRunning {
		return c, fmt.Errorf("container %s is not running (%s): %w", c.ID, c.State, cerrdefs.ErrFailedPrecondition)
	}
	return c, nil
}

// checkStreams enforces the CRI's rules for the streams of an exec or attach.
func checkStreams(stdin, stdout, stderr, tty bool) error {
	switch {
	case !stdin && !stdout && !stderr:
		return fmt.Errorf("one of stdin, stdout and stderr must be requested: %w", cerrdefs.ErrInvalidArgument)
	case tty && stderr:
		return fmt.Errorf("a tty has no separate stderr: ask for stdout only: %w", cerrdefs.ErrInvalidArgument)
	}
	return nil
}

// streamRequest is what an exec and an attach request share.
type streamRequest interface {
	GetContainerId() string
	GetStdin() bool
	GetStdout() bool
	GetStderr() bool
	GetTty() bool
}

// streamTarget does what Exec and Attach share: it returns the streaming server and
// the full ID of req's container, which must run, after checking, in this order, that
// there is a server, that the request is otherwise valid (invalid is the request's
// own argument error, or nil) and its streams.
func (s *Service) streamTarget(ctx context.Context, req streamRequest, invalid error) (Streamer, string, error) {
	st, err := s.streamer()
	if err != nil {
		return nil, "", err
	}
	if invalid != nil {
		return nil, "", invalid
	}
	if err := checkStreams(req.GetStdin(), req.GetStdout(), req.GetStderr(), req.GetTty()); err != nil {
		return nil, "", err
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, "", err
	}
	return st, c.ID, nil
}
