package core

import (
	"sync"
	"time"
)

// cpuRates turns the cumulative CPU time of containers and sandboxes into a rate
// (the CRI's usage_nano_cores), as containerd does: kubelet takes a pod's CPU usage in
// cores from the runtime when it reads stats from the CRI (PodAndContainerStatsFromCRI),
// and crictl stats shows it. The rate is over at least cpuRateWindow when a sample that
// old is kept, so that two askers a moment apart do not see the noise of a few
// milliseconds; the samples of what nobody asked about for cpuRateForget are forgotten.
type cpuRates struct {
	mu       sync.Mutex
	samples  map[string]cpuSamples
	prunedAt time.Time
}

type cpuSample struct {
	usage uint64 // cumulative CPU time, ns
	at    time.Time
}

// cpuSamples are the two last kept samples of one container: a rate is over the older
// while the newer is less than cpuRateWindow old.
type cpuSamples struct {
	older, newer cpuSample
	hasOlder     bool
	asked        time.Time
}

const (
	cpuRateWindow = time.Second
	cpuRateForget = 10 * time.Minute
)

// rate returns the CPU usage of id in nanocores (1e9 = one core) between a kept sample
// and usage at at; 0 for its first sample (as containerd) or when the count went back
// (a restart).
func (r *cpuRates) rate(id string, usage uint64, at time.Time) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples == nil {
		r.samples = map[string]cpuSamples{}
	}
	now := cpuSample{usage: usage, at: at}
	prev, ok := r.samples[id]
	var out uint64
	if ok && usage >= prev.newer.usage {
		base := prev.newer
		if at.Sub(base.at) < cpuRateWindow && prev.hasOlder {
			base = prev.older
		}
		if at.After(base.at) {
			out = uint64(float64(usage-base.usage) / float64(at.Sub(base.at)) * float64(time.Second))
		}
	}
	switch {
	case !ok || usage < prev.newer.usage:
		prev = cpuSamples{newer: now}
	case at.Sub(prev.newer.at) >= cpuRateWindow:
		prev.older, prev.newer, prev.hasOlder = prev.newer, now, true
	}
	prev.asked = at
	r.samples[id] = prev
	if at.Sub(r.prunedAt) >= time.Minute {
		r.prunedAt = at
		for k, s := range r.samples {
			if at.Sub(s.asked) >= cpuRateForget {
				delete(r.samples, k)
			}
		}
	}
	return out
}
