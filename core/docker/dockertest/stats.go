package dockertest

import (
	"context"
	"maps"
	"time"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// SetStats makes ContainerStats of container id return s.
func (f *Fake) SetStats(id string, s docker.ContainerStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		s.Networks = maps.Clone(s.Networks)
		c.stats = &s
	}
}

// ContainerStats implements docker.Client: the sample set with SetStats, or a zero
// sample taken now.
func (f *Fake) ContainerStats(ctx context.Context, id string) (docker.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "ContainerStats", "container stats", id)
	if err != nil {
		return docker.ContainerStats{}, err
	}
	if c.stats == nil {
		return docker.ContainerStats{Timestamp: time.Now()}, nil
	}
	s := *c.stats
	s.Networks = maps.Clone(s.Networks)
	return s, nil
}
