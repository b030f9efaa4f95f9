package logs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/logctx"
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

	mu      sync.Mutex
	closed  bool
	copiers map[string]*copier
}

// NewManager returns a Manager reading logs from src. Invalid values in cfg are
// replaced by the defaults (see Config.Validate); a nil log discards messages.
func NewManager(src Source, cfg Config, log logrus.FieldLogger) *Manager {
	return &Manager{
		src: src, cfg: cfg.withDefaults(), log: logctx.OrDiscard(log), copiers: map[string]*copier{},
		records: newRecords(cfg.StateDir),
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

// copier copies one container's log into its CRI log file.
type copier struct {
	id     string
	file   LogFile
	open   opener
	path   string // file.Path()
	log    logrus.FieldLogger
	cancel context.CancelFunc
	// done is closed when run returns.
	done chan struct{}
	// finished is set before done is closed when the log reached its end.
	finished bool
	// warnedMalformed limits the warning about messages without a timestamp to one.
	warnedMalformed atomic.Bool

	// mu is held by the stream parsers while they parse and write, serialising
	// writes to the file (one line at a time from either stream); it guards the
	// parsers and the fields below.
	mu sync.Mutex
	f  *os.File
	// last is the last chunk written; the next attempt resumes there.
	last resumePoint
	// filter drops what the current attempt receives again.
	filter resumePoint
	// wrote is set when the current attempt wrote a chunk.
	wrote bool
	// brokenLine is set when a write failed part-way, leaving a line without newline.
	brokenLine  bool
	writeFailed bool
	buf         []byte
}

func (c *copier) run(ctx context.Context, src Source, cfg Config) {
	defer close(c.done)
	defer c.closeFile()
	stdout := newLineParser(&c.mu, cfg.MaxLineSize, c.emitter(streamStdout), time.Now, c.malformed(streamStdout))
	stderr := newLineParser(&c.mu, cfg.MaxLineSize, c.emitter(streamStderr), time.Now, c.malformed(streamStderr))
	pair(stdout, stderr)
	backoff := cfg.RetryInitial
	failing := false
	for {
		since := c.beginAttempt()
		err := src.ContainerLogs(ctx, c.id, docker.LogsOptions{Follow: true, Since: since, Stdout: stdout, Stderr: stderr})
		if ctx.Err() != nil {
			flushPair(stdout, stderr, false)
			c.log.Debug("stopped copying the container log")
			return
		}
		if err == nil || endOfLog(err) {
			flushPair(stdout, stderr, true)
			c.finished = true
			if err != nil {
				c.log.WithError(err).Warn("the engine cannot give this container's log (gone, or a log driver it cannot read); stopped copying it")
			} else {
				c.log.Debug("copied the container log to its end")
			}
			return
		}
		// What the writers hold of an unfinished message comes again on the next attempt.
		stdout.reset()
		stderr.reset()
		if c.attemptWrote() {
			backoff = cfg.RetryInitial
			failing = false
		}
		entry := c.log.WithError(err)
		if !failing {
			entry.WithField("retry_in", backoff.String()).Warn("following the container log failed; retrying")
		} else {
			entry.WithField("retry_in", backoff.String()).Debug("following the container log failed again; retrying")
		}
		failing = true
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			c.log.Debug("stopped copying the container log")
			return
		case <-t.C:
		}
		backoff = min(2*backoff, cfg.RetryMax)
	}
}

// beginAttempt returns the time to follow the engine's log from.
func (c *copier) beginAttempt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.filter = c.last
	c.wrote = false
	return c.last.ts
}

func (c *copier) attemptWrote() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wrote
}

func (c *copier) emitter(stream string) emitFunc {
	return func(ts time.Time, partial bool, content []byte) {
		c.writeLocked(ts, stream, partial, content)
	}
}

func (c *copier) malformed(stream string) func([]byte) {
	return func(prefix []byte) {
		if c.warnedMalformed.CompareAndSwap(false, true) {
			c.log.WithFields(logrus.Fields{"stream": stream, "line_start": prefix}).Warn("engine sent a line without a timestamp; stamping such lines with the current time")
		}
	}
}

// writeLocked appends one chunk to the file as a single write; c.mu is held (by the
// stream's parser), so lines of the two streams never interleave.
func (c *copier) writeLocked(ts time.Time, stream string, partial bool, content []byte) {
	content, ok := c.filter.filter(ts, stream, partial, content)
	if !ok || c.f == nil {
		return
	}
	c.buf = c.buf[:0]
	if c.brokenLine {
		// End the fragment a failed write left, so it does not swallow this line.
		c.buf = append(c.buf, '\n')
	}
	c.buf = appendCRILine(c.buf, ts, stream, partial, content)
	n, err := c.f.Write(c.buf)
	switch {
	case err != nil:
		if n > 0 {
			c.brokenLine = true
		}
		if !c.writeFailed {
			c.log.WithError(err).Warn("cannot write the container log; dropping lines until writes succeed")
		}
		c.writeFailed = true
	case c.writeFailed:
		c.brokenLine = false
		c.writeFailed = false
		c.log.Info("writing the container log again")
	default:
		c.brokenLine = false
	}
	c.last.record(ts, stream, partial, len(content))
	c.wrote = true
}

func (c *copier) reopen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return fmt.Errorf("log of container %s is not being copied: %w", c.id, errdefs.ErrFailedPrecondition)
	}
	f, replaced, err := c.open.openLogFile(c.file)
	if err != nil {
		// Keep writing to the old file; kubelet renames it back when reopening fails.
		return fmt.Errorf("reopen container log: %w: %w", err, errdefs.ErrFailedPrecondition)
	}
	if replaced {
		c.log.Info("replaced the symbolic link at the container log path with a CRI log file")
	}
	if err := c.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		c.log.WithError(err).Debug("closing the rotated container log")
	}
	c.f = f
	c.brokenLine = false
	c.log.Debug("reopened the container log")
	return nil
}

func (c *copier) closeFile() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		if err := c.f.Close(); err != nil {
			c.log.WithError(err).Debug("closing the container log")
		}
		c.f = nil
	}
}

// endOfLog tells whether err means the engine will never give (more of) the log: the
// container is gone, or its log driver cannot be read back (NotImplemented or
// FailedPrecondition, e.g. a remote driver without dual logging). Retrying those
// would only spin.
func endOfLog(err error) bool {
	return errdefs.IsNotFound(err) || errdefs.IsNotImplemented(err) || errdefs.IsFailedPrecondition(err)
}
