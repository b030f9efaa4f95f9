package imagecache

import "time"

// The cache's states, as crictl info and the metrics name them.
const (
	// StateStarting: the first fill is under way; requests go to the engine.
	StateStarting = "starting"
	// StateLive: requests are answered from the index.
	StateLive = "live"
	// StateFallback: the event stream is down; requests go to the engine.
	StateFallback = "fallback"
)

// States lists every state the cache can be in.
func States() []string { return []string{StateStarting, StateLive, StateFallback} }

// Stats is the cache's state in numbers, for metrics.
type Stats struct {
	// State is one of States.
	State string
	// Images is the number of images in the index.
	Images int
	// Resyncs, Events and Reconnects count full reconciliations with the engine's list,
	// image events applied, and reconnections of the event stream since start.
	Resyncs, Events, Reconnects int
	// LastResync is when the index was last reconciled; zero: not yet.
	LastResync time.Time
}

// Stats returns the cache's state now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		State: c.st.String(), Images: c.idx.len(),
		Resyncs: c.resyncs, Events: c.events, Reconnects: c.reconnects, LastResync: c.lastResync,
	}
}
