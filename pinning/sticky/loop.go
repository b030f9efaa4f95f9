package sticky

import (
	"context"
	"sync"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
	"github.com/sirupsen/logrus"
)

// keeperLoop is the schedule both sticky keepers (containerd and classic store) run
// on: a step at start, on every trigger and every interval, while a watch of the
// engine's image events triggers steps, resubscribed with backoff when it breaks.
type keeperLoop struct {
	kick chan struct{}
	log  logrus.FieldLogger
}

func newKeeperLoop(log logrus.FieldLogger) keeperLoop {
	return keeperLoop{kick: make(chan struct{}, 1), log: log}
}

// trigger asks the loop for a step soon.
func (l keeperLoop) Trigger() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run calls step at start, on trigger and every interval until ctx ends, logging a
// failed step with failure. Meanwhile subscribe follows the events until its stream
// breaks (it returns); each resubscription triggers a step, which catches what
// happened in between.
func (l keeperLoop) run(ctx context.Context, interval time.Duration, subscribe, step func(context.Context) error, failure string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { l.watch(ctx, subscribe) })
	t := time.NewTicker(interval)
	defer t.Stop()
	l.Trigger()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-t.C:
		}
		if err := step(ctx); err != nil && ctx.Err() == nil {
			l.log.WithError(err).Warn(failure)
		}
	}
}

func (l keeperLoop) watch(ctx context.Context, subscribe func(context.Context) error) {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := subscribe(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			wait = 100 * time.Millisecond
		}
		l.log.WithError(err).Debug("sticky pins: image event stream broke; resubscribing")
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
		l.Trigger()
	}
}

// loadRemembered reads what a keeper remembered at its last run (the state called
// name), by key; an unreadable state is logged with warning and remembers nothing.
func loadRemembered[T any](state statefile.Store, name string, key func(T) string, log logrus.FieldLogger, warning string) map[string]T {
	var saved []T
	if _, err := state.Load(name, &saved); err != nil {
		log.WithError(err).Warn(warning)
	}
	out := make(map[string]T, len(saved))
	for _, v := range saved {
		out[key(v)] = v
	}
	return out
}
