package logctx

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Phases adds up the time a request spends in each of its phases (an engine call,
// a CNI plugin, a checkpoint write), so that the request's debug line accounts for
// its duration. It is safe for concurrent use.
type Phases struct {
	mu sync.Mutex
	d  map[string]time.Duration
	n  map[string]int
}

type phasesKey struct{}

// WithPhases returns ctx carrying a new Phases for the request, and that Phases.
func WithPhases(ctx context.Context) (context.Context, *Phases) {
	p := &Phases{d: map[string]time.Duration{}, n: map[string]int{}}
	return context.WithValue(ctx, phasesKey{}, p), p
}

// Time starts timing phase name of the request ctx carries; calling the returned
// function ends it. Without Phases in ctx it does nothing. Phases with the same name
// add up (two inspects: their sum, counted twice).
func Time(ctx context.Context, name string) func() {
	p, ok := ctx.Value(phasesKey{}).(*Phases)
	if !ok {
		return func() {}
	}
	start := time.Now()
	return func() {
		d := time.Since(start)
		p.mu.Lock()
		p.d[name] += d
		p.n[name]++
		p.mu.Unlock()
	}
}

// Fields returns one field per phase, named "t." + its name, whose value is its
// duration in milliseconds, followed by "/N" when it ran N > 1 times.
func (p *Phases) Fields() logrus.Fields {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := make(logrus.Fields, len(p.d))
	for name, d := range p.d {
		v := fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
		if n := p.n[name]; n > 1 {
			v += "/" + strconv.Itoa(n)
		}
		f["t."+name] = v
	}
	return f
}

// Total is the sum of the phases' durations (they may overlap when a request runs
// steps concurrently).
func (p *Phases) Total() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var t time.Duration
	for _, d := range p.d {
		t += d
	}
	return t
}
