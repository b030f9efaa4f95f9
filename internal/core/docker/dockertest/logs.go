package dockertest

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// logLine is one message of a container's log.
type logLine struct {
	stream string // "stdout" or "stderr"
	data   string // as sent after the timestamp: a full line ends in a newline
	time   time.Time
}

// logBreak is a broken log stream to come (see BreakLogs).
type logBreak struct {
	messages, bytes int
	err             error
}

// AppendLog adds line to container id's log on stream ("stdout" or "stderr") at t,
// ending it with a newline if it has none; it does nothing when there is no such
// container.
func (f *Fake) AppendLog(id, stream, line string, t time.Time) {
	f.AppendLogData(id, stream, strings.TrimSuffix(line, "\n")+"\n", t)
}

// AppendLogData adds one message to container id's log on stream at t, sent as data
// is: without a final newline it is a partial line, as the engine sends a line cut
// at its 16 KiB buffer or output that ends without one. It does nothing when there
// is no such container.
func (f *Fake) AppendLogData(id, stream, data string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		c.logs = append(c.logs, logLine{stream: stream, data: data, time: t})
		f.notify()
	}
}

// SetLogChunkSize makes ContainerLogs write each message in pieces of at most n
// bytes, as a stream arriving in small packets does (0, the default: one Write
// per message).
func (f *Fake) SetLogChunkSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logChunk = n
}

// SetLogSinceIgnored makes ContainerLogs send every message whatever the Since it is
// asked for, as an engine whose since filter is coarser than the caller's resume
// point: the caller must drop what it already has.
func (f *Fake) SetLogSinceIgnored(ignored bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceIgnored = ignored
}

// BreakLogs makes the next ContainerLogs call for container id fail with err after
// it sent messages messages and then the first bytes bytes of the next one, as a
// connection to the engine breaking mid-stream (once; a call that ends before
// reaching that message leaves the break for the next one). It does nothing when
// there is no such container.
func (f *Fake) BreakLogs(id string, messages, bytes int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		c.logBreak = &logBreak{messages: messages, bytes: bytes, err: err}
	}
}

// LogsRequests returns the options of every ContainerLogs call made with ref (as
// the caller passed it), failed calls included, in order; their writers are nil.
func (f *Fake) LogsRequests(ref string) []docker.LogsOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.logRequests[ref])
}

// ContainerLogs implements docker.Client: the messages logged since opts.Since, each
// as "<RFC 3339 nano time> <message>"; with Follow, new ones until the container
// stops or is removed, or ctx ends. Active("ContainerLogs") counts the call until
// it returns.
func (f *Fake) ContainerLogs(ctx context.Context, id string, opts docker.LogsOptions) error {
	f.mu.Lock()
	req := opts
	req.Stdout, req.Stderr = nil, nil
	f.logRequests[id] = append(f.logRequests[id], req)
	c, err := f.checkedContainer(ctx, "ContainerLogs", "container logs", id)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	defer f.begin("ContainerLogs")()
	w := &logWriter{f: f, c: c, opts: opts, tty: c.spec.Tty, chunk: f.logChunk, ignoreSince: f.sinceIgnored}
	next := 0
	for {
		lines := slices.Clone(c.logs[next:])
		next = len(c.logs)
		running := c.details.State == docker.StateRunning && f.containers[c.details.ID] == c
		changed := f.changed
		f.mu.Unlock()
		if err := w.write(lines); err != nil {
			return err
		}
		if !opts.Follow || !running {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		f.mu.Lock()
	}
}

// logWriter sends a container's log messages to one ContainerLogs caller.
type logWriter struct {
	f           *Fake
	c           *fakeContainer
	opts        docker.LogsOptions
	tty         bool
	chunk       int
	ignoreSince bool
	sent        int // messages sent
}

// write sends lines, or fails when the stream breaks (see BreakLogs).
func (w *logWriter) write(lines []logLine) error {
	for _, l := range lines {
		if !w.ignoreSince && l.time.Before(w.opts.Since) {
			continue
		}
		dst := w.opts.Stdout
		if l.stream == "stderr" && !w.tty {
			dst = w.opts.Stderr
		}
		if dst == nil {
			continue
		}
		text := l.time.Format(time.RFC3339Nano) + " " + l.data
		if brk := w.takeBreak(); brk != nil {
			if err := w.send(dst, text[:min(brk.bytes, len(text))]); err != nil {
				return err
			}
			return brk.err
		}
		if err := w.send(dst, text); err != nil {
			return err
		}
		w.sent++
	}
	return nil
}

// takeBreak returns the container's break when it is due now, and disarms it.
func (w *logWriter) takeBreak() *logBreak {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	brk := w.c.logBreak
	if brk == nil || brk.messages != w.sent {
		return nil
	}
	w.c.logBreak = nil
	return brk
}

// send writes text to dst in pieces of at most chunk bytes.
func (w *logWriter) send(dst io.Writer, text string) error {
	for text != "" {
		n := len(text)
		if w.chunk > 0 {
			n = min(n, w.chunk)
		}
		if _, err := io.WriteString(dst, text[:n]); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}

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
