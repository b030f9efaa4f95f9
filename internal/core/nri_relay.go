package core

import (
	"context"
	"sync"
)

// nriState is what the NRI relay remembers in this process: the sandboxes and
// containers made but not yet answered (their RunPodSandbox or CreateContainer
// plugins have not returned: the CRI must not show them), and the stops relayed
// once each (a container's stop is relayed by StopContainer, by its exit event or by
// RemoveContainer, whichever comes first; the others wait for it).
type nriState struct {
	mu      sync.Mutex
	hidden  map[string]bool
	relayed map[string]chan struct{}
}

func newNRIState() *nriState {
	return &nriState{hidden: map[string]bool{}, relayed: map[string]chan struct{}{}}
}

// hide keeps id out of the CRI's lists and status until the returned func is called.
func (s *Service) hide(id string) func() {
	s.nriState.mu.Lock()
	s.nriState.hidden[id] = true
	s.nriState.mu.Unlock()
	return func() {
		s.nriState.mu.Lock()
		delete(s.nriState.hidden, id)
		s.nriState.mu.Unlock()
	}
}

// hidden tells whether id is being made and its plugins have not returned.
func (s *Service) hidden(id string) bool {
	if s.deps.NRI == nil {
		return false
	}
	s.nriState.mu.Lock()
	defer s.nriState.mu.Unlock()
	return s.nriState.hidden[id]
}

// relayOnce runs relay for key unless it ran (or is running) already in this process;
// a second caller waits for the first to finish, so that what it relays next (a
// removal after a stop) reaches the plugins in order.
func (s *Service) relayOnce(ctx context.Context, key string, relay func()) {
	s.nriState.mu.Lock()
	done, ok := s.nriState.relayed[key]
	if !ok {
		done = make(chan struct{})
		s.nriState.relayed[key] = done
	}
	s.nriState.mu.Unlock()
	if ok {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	defer close(done)
	relay()
}

// forgetRelayed drops what relayOnce remembers of key (the object is removed).
func (s *Service) forgetRelayed(key string) {
	s.nriState.mu.Lock()
	delete(s.nriState.relayed, key)
	s.nriState.mu.Unlock()
}

// Keys of relayOnce.
func stopKey(id string) string    { return "stop/" + id }
func podStopKey(id string) string { return "podstop/" + id }
