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

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

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
	// counts are the Manager's totals.
	counts *counters

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
	c.counts.written(n, err)
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
