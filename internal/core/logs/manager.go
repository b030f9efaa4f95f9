package logs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Source is the engine side of the copiers (implemented by docker.Client).
type Source interface {
	// ContainerLogs copies the container's log messages, each prefixed by its RFC 3339
	// timestamp and a space, to opts' writers until the log ends (with Follow: until
	// the container stops) or ctx ends.
	ContainerLogs(ctx context.Context, id string, opts docker.LogsOptions) error
}

// Defaults of Config.
const (
	DefaultMaxLineSize  = 16 * 1024
	DefaultRetryInitial = 100 * time.Millisecond
	DefaultRetryMax     = 5 * time.Second
)

// Config tunes a Manager.
type Config struct {
	// MaxLineSize is the most content bytes of one line in a CRI log; longer lines are
	// written as partial (P) chunks followed by a full (F) one, as containerd's
	// max_container_log_line_size does. 0 means DefaultMaxLineSize.
	MaxLineSize int
	// RetryInitial is the wait before following the engine's log again after the
	// stream failed (engine restarting or unreachable); it doubles up to RetryMax
	// while failures continue. 0 means DefaultRetryInitial.
	RetryInitial time.Duration
	// RetryMax caps the wait between retries. 0 means DefaultRetryMax.
	RetryMax time.Duration
	// StateDir is where the log file of each container is recorded (Record), so that
	// copies resume to the files we chose, not to a path read from a container label.
	// "" records in memory only.
	StateDir string
}

// DefaultConfig returns the defaults: 16 KiB lines, retries from 100ms up to 5s.
func DefaultConfig() Config {
	return Config{MaxLineSize: DefaultMaxLineSize, RetryInitial: DefaultRetryInitial, RetryMax: DefaultRetryMax}
}

// Validate reports values a Manager cannot use (zero values mean the defaults).
func (c Config) Validate() error {
	switch {
	case c.MaxLineSize < 0:
		return fmt.Errorf("log max line size %d is negative: %w", c.MaxLineSize, errdefs.ErrInvalidArgument)
	case c.RetryInitial < 0 || c.RetryMax < 0:
		return fmt.Errorf("log retry waits must not be negative: %w", errdefs.ErrInvalidArgument)
	}
	initial := c.RetryInitial
	if initial == 0 {
		initial = DefaultRetryInitial
	}
	if c.RetryMax > 0 && c.RetryMax < initial {
		return fmt.Errorf("log retry max %s is below its initial wait %s: %w", c.RetryMax, initial, errdefs.ErrInvalidArgument)
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := DefaultConfig()
	if c.MaxLineSize <= 0 {
		c.MaxLineSize = def.MaxLineSize
	}
	if c.RetryInitial <= 0 {
		c.RetryInitial = def.RetryInitial
	}
	if c.RetryMax <= 0 {
		c.RetryMax = max(def.RetryMax, c.RetryInitial)
	}
	c.RetryMax = max(c.RetryMax, c.RetryInitial)
	return c
}

// Manager copies containers' engine logs into CRI log files, one copier per
// container. It is safe for concurrent use.
type Manager struct {
	src     Source
	cfg     Config
	log     logrus.FieldLogger
	open    opener
	records *records

	// counts are the lines and bytes every copier wrote or dropped.
	counts *counters

	mu      sync.Mutex
	closed  bool
	copiers map[string]*copier
}

// NewManager returns a Manager reading logs from src. Invalid values in cfg are
// replaced by the defaults (see Config.Validate); a nil log discards messages.
func NewManager(src Source, cfg Config, log logrus.FieldLogger) *Manager {
	return &Manager{
		src: src, cfg: cfg.withDefaults(), log: logctx.OrDiscard(log), copiers: map[string]*copier{},
		records: newRecords(cfg.StateDir), counts: &counters{},
	}
}

// Start begins copying container id's log to the CRI log file recorded for it
// (Record), creating the file (mode 0640; kubelet creates its directory) or appending
// to it after the last line already there, so that a restarted shim neither loses nor
// repeats lines. Starting a container that is being copied is a no-op; starting one
// whose copier reached the end of its log copies whatever was logged since. A
// container without a recorded log file is NotFound.
//
// The copier outlives ctx; it runs until the container's log ends, Stop or Close.
func (m *Manager) Start(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("container log needs a container ID: %w", errdefs.ErrInvalidArgument)
	}
	lf, ok := m.records.get(id)
	if !ok {
		return fmt.Errorf("no log file is recorded for container %s: %w", id, errdefs.ErrNotFound)
	}
	path := lf.Path()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("log manager is closed: %w", errdefs.ErrFailedPrecondition)
	}
	log := m.log.WithFields(logrus.Fields{"container": id, "log_path": path})
	if c, ok := m.copiers[id]; ok {
		select {
		case <-c.done:
			// Finished: start over from where it stopped.
		default:
			if c.path != path {
				log.WithField("copying_to", c.path).Debug("already copying the container log elsewhere")
			}
			return nil
		}
	}
	f, replaced, err := m.open.openLogFile(lf)
	if err != nil {
		return fmt.Errorf("open container log: %w: %w", err, errdefs.ErrFailedPrecondition)
	}
	if replaced {
		log.Info("replaced the symbolic link at the container log path with a CRI log file")
	}
	last, err := m.open.resumeFrom(f, lf, log)
	if err != nil {
		f.Close()
		return err
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &copier{
		id:     id,
		file:   lf,
		open:   m.open,
		path:   path,
		log:    log,
		cancel: cancel,
		done:   make(chan struct{}),
		f:      f,
		last:   last,
		counts: m.counts,
	}
	m.copiers[id] = c
	if last.ts.IsZero() {
		log.Debug("copying the container log")
	} else {
		log.WithField("after", last.ts.UTC().Format(timeFormat)).Debug("copying the container log after its last line")
	}
	go c.run(cctx, m.src, m.cfg)
	return nil
}

// Stop stops copying container id's log and closes its file, after writing what the
// engine already sent. Callers that need the whole log of a stopped container call
// Wait first. Stopping a container that is not being copied does nothing.
func (m *Manager) Stop(id string) {
	m.mu.Lock()
	c := m.copiers[id]
	delete(m.copiers, id)
	m.mu.Unlock()
	if c != nil {
		c.cancel()
		<-c.done
	}
}

// Reopen closes container id's log file and opens the file at its path again, after
// kubelet's log rotation renamed it. It fails with FailedPrecondition when the log is
// not being copied (never started, stopped, or at its end).
func (m *Manager) Reopen(id string) error {
	m.mu.Lock()
	c := m.copiers[id]
	m.mu.Unlock()
	if c == nil {
		return fmt.Errorf("log of container %s is not being copied: %w", id, errdefs.ErrFailedPrecondition)
	}
	return c.reopen()
}

// Wait blocks until the copier of container id reached the end of the log of the
// finished container (nil), or ctx ends (ctx's error). It fails with NotFound when the
// log is not being copied and with FailedPrecondition when the copier was stopped
// before the end of the log.
func (m *Manager) Wait(ctx context.Context, id string) error {
	m.mu.Lock()
	c := m.copiers[id]
	m.mu.Unlock()
	if c == nil {
		return fmt.Errorf("log of container %s is not being copied: %w", id, errdefs.ErrNotFound)
	}
	select {
	case <-c.done:
		if c.finished {
			return nil
		}
		return fmt.Errorf("log copier of container %s was stopped before the end of the log: %w", id, errdefs.ErrFailedPrecondition)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops all copiers and waits for them; later Starts fail.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	cs := m.copiers
	m.copiers = map[string]*copier{}
	m.mu.Unlock()
	for _, c := range cs {
		c.cancel()
	}
	for _, c := range cs {
		<-c.done
	}
}
