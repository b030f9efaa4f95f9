package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// engineProbe is what waiting for the engine asks of it.
type engineProbe interface {
	CheckVersion(ctx context.Context) (docker.Version, error)
	Info(ctx context.Context) (docker.Info, error)
}

// engineWait paces waitForEngine: each attempt is bounded by attempt; the pause
// between attempts starts at first and doubles up to max; after total (0: never) the
// wait gives up.
type engineWait struct {
	attempt, first, max, total time.Duration
}

// defaultEngineWait is used at start-up.
var defaultEngineWait = engineWait{attempt: 10 * time.Second, first: time.Second, max: 30 * time.Second}

// errStoppedWaiting is returned when a stop signal arrives while the engine is awaited.
var errStoppedWaiting = errors.New("stopped while waiting for the docker engine")

// waitForEngine returns the engine's version and /info, waiting for the engine while
// it does not answer (a node booting, the engine restarting): cri-dockerd decides
// nothing about the engine — its image store, hence whether containerd record labels
// pin — before /info has been read. An engine that answers but is too old is an error
// at once; a signal on stop ends the wait.
func waitForEngine(engine engineProbe, endpoint string, w engineWait, stop <-chan os.Signal, log logrus.FieldLogger) (docker.Version, docker.Info, error) {
	pause, start := w.first, time.Now()
	for attempt := 1; ; attempt++ {
		v, info, err := probeEngine(engine, w.attempt)
		if err == nil {
			return v, info, nil
		}
		if cerrdefs.IsFailedPrecondition(err) || (w.total > 0 && time.Since(start) >= w.total) {
			return v, info, fmt.Errorf("docker engine at %s: %w", endpoint, err)
		}
		log.WithError(err).WithField("attempt", attempt).WithField("retry_in", pause.String()).
			Warn("docker engine does not answer yet; waiting for it")
		select {
		case <-stop:
			return v, info, fmt.Errorf("%w at %s: %w", errStoppedWaiting, endpoint, err)
		case <-time.After(pause):
		}
		pause = min(2*pause, w.max)
	}
}

func probeEngine(engine engineProbe, timeout time.Duration) (docker.Version, docker.Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := engine.CheckVersion(ctx)
	if err != nil {
		return v, docker.Info{}, err
	}
	info, err := engine.Info(ctx)
	return v, info, err
}
