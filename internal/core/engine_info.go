package core

import (
	"context"
	"sync"
	"time"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// infoMaxAge is how long the engine's /info is reused. CreateContainer (the cgroup
// driver), RunPodSandbox (runtimes, cgroup driver), Status (runtimes) and the
// metrics (data root) read it; the engine computes it from scratch each time
// (tens of milliseconds with the containerd store). What they read changes only
// when the engine is reconfigured, and a few seconds' delay in seeing that is harmless
// (kubelet retries a pod whose new runtime handler is not known yet).
const infoMaxAge = 5 * time.Second

// infoCache remembers the engine's last /info. Errors are not remembered.
type infoCache struct {
	mu   sync.Mutex
	info docker.Info
	at   time.Time
}

// engineInfo returns the engine's /info, at most infoMaxAge old.
func (s *Service) engineInfo(ctx context.Context) (docker.Info, error) {
	c := s.info
	c.mu.Lock()
	if !c.at.IsZero() && time.Since(c.at) < infoMaxAge {
		info := c.info
		c.mu.Unlock()
		return info, nil
	}
	c.mu.Unlock()
	info, err := s.deps.Docker.Info(ctx)
	if err != nil {
		return info, err
	}
	c.mu.Lock()
	c.info, c.at = info, time.Now()
	c.mu.Unlock()
	return info, nil
}
