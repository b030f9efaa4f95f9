package dockertest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// SetExecHandler makes Exec run h (nil restores the default: no output, exit code 0).
// h runs without the fake's lock held; it may write to opts' writers and read
// opts.Stdin.
func (f *Fake) SetExecHandler(h func(id string, opts docker.ExecOptions) (int, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execHandler = h
}

// Exec implements docker.Client with the handler set by SetExecHandler. When ctx
// ends before the handler returns, Exec returns ctx's error (the handler goes on).
// With Tty, the sizes from opts.Resize are recorded (see Resizes) until Exec
// returns, and the handler's Resize delivers each one once recorded; it is closed
// when opts.Resize is, or Exec returns. Without Tty the handler gets a nil Resize.
// Active("Exec") counts the call until it returns.
func (f *Fake) Exec(ctx context.Context, id string, opts docker.ExecOptions) (int, error) {
	var handler func(id string, opts docker.ExecOptions) (int, error)
	c, cid, end, err := f.startStream(ctx, "Exec", "exec in container", id, func() { handler = f.execHandler })
	if err != nil {
		return -1, err
	}
	defer end()
	resize, stopResizes := f.forwardResizes(ctx, c, opts.Tty, opts.Resize)
	defer stopResizes()
	opts.Resize = resize
	if handler == nil {
		return 0, nil
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := handler(cid, opts)
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// SetAttachHandler makes Attach run h (nil restores the default: with both Stdin
// and Stdout set, stdin is echoed to stdout until it ends; Attach also ends when
// the container stops or is removed, or ctx ends). h runs without the fake's lock
// held; it may read opts.Stdin (what it reads is recorded, see AttachedStdin) and
// write to opts' writers. With Tty, its Resize delivers the sizes the fake recorded
// (see Resizes), as for an exec handler.
func (f *Fake) SetAttachHandler(h func(id string, opts docker.AttachOptions) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attachHandler = h
}

// Attach implements docker.Client with the handler set by SetAttachHandler, for a
// running container: a missing one is NotFound, one not running FailedPrecondition.
// When ctx ends before the handler returns, Attach returns ctx's error (the handler
// goes on). With Tty, the sizes from opts.Resize are recorded (see Resizes) until
// Attach returns. Active("Attach") counts the call until it returns.
func (f *Fake) Attach(ctx context.Context, id string, opts docker.AttachOptions) error {
	op := "attach to container " + id
	var handler func(id string, opts docker.AttachOptions) error
	c, cid, end, err := f.startStream(ctx, "Attach", "attach to container", id, func() { handler = f.attachHandler })
	if err != nil {
		return err
	}
	defer end()
	resize, stopResizes := f.forwardResizes(ctx, c, opts.Tty, opts.Resize)
	defer stopResizes()
	opts.Resize = resize
	if opts.Stdin != nil {
		opts.Stdin = &stdinRecorder{f: f, c: c, r: opts.Stdin}
	}

	if handler == nil {
		return f.echoUntilStopped(ctx, op, c, opts)
	}
	done := make(chan error, 1)
	go func() { done <- handler(cid, opts) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
}

// startStream starts a call of method (what names it in errors) on container id,
// which must run (else FailedPrecondition), and returns the container and its full
// ID; pick reads the call's handler under f's lock. The call counts in
// Active(method) until end is called.
func (f *Fake) startStream(ctx context.Context, method, what, id string, pick func()) (c *fakeContainer, cid string, end func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err = f.checkedContainer(ctx, method, what, id)
	if err != nil {
		return nil, "", nil, err
	}
	if c.details.State != docker.StateRunning {
		return nil, "", nil, fmt.Errorf("%s %s: container is not running (%s): %w", what, id, c.details.State, cerrdefs.ErrFailedPrecondition)
	}
	pick()
	return c, c.details.ID, f.begin(method), nil
}

// echoUntilStopped is the default attach: it copies opts.Stdin to opts.Stdout, if
// both are set, until stdin ends, and otherwise waits; either ends early when
// container c stops or is removed (nil) or ctx ends. Nothing is written to
// opts.Stdout after it returned (the copy may stay blocked in a Read of opts.Stdin
// until that returns).
func (f *Fake) echoUntilStopped(ctx context.Context, op string, c *fakeContainer, opts docker.AttachOptions) error {
	var copied chan error // nil, never ready, without an echo
	if opts.Stdin != nil && opts.Stdout != nil {
		out := &closableWriter{w: opts.Stdout}
		defer out.close()
		copied = make(chan error, 1)
		go func() {
			_, err := io.Copy(out, opts.Stdin)
			copied <- err
		}()
	}
	for {
		f.mu.Lock()
		running := c.details.State == docker.StateRunning && f.containers[c.details.ID] == c
		changed := f.changed
		f.mu.Unlock()
		if !running {
			return nil
		}
		select {
		case err := <-copied:
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			return nil
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
}

// closableWriter writes to w until closed, and then fails with io.ErrClosedPipe.
type closableWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (cw *closableWriter) Write(p []byte) (int, error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.closed {
		return 0, io.ErrClosedPipe
	}
	return cw.w.Write(p)
}

func (cw *closableWriter) close() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.closed = true
}

// forwardResizes starts recording the sizes from sizes for container c, when tty
// and sizes are set, and returns the channel a handler gets them from: each size
// once recorded, closed when sizes is closed (after the rest was delivered), ctx
// ends or stop is called. stop waits for the recording to end, so every size
// received before it is recorded, whether the handler read them or not. Caller
// does not hold mu.
func (f *Fake) forwardResizes(ctx context.Context, c *fakeContainer, tty bool, sizes <-chan docker.TerminalSize) (_ <-chan docker.TerminalSize, stop func()) {
	if !tty || sizes == nil {
		return nil, func() {}
	}
	out := make(chan docker.TerminalSize)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		var queue []docker.TerminalSize // recorded, not yet delivered
		in := sizes
		for in != nil || len(queue) > 0 {
			var deliver chan<- docker.TerminalSize // nil, never ready, with nothing to deliver
			var next docker.TerminalSize
			if len(queue) > 0 {
				deliver, next = out, queue[0]
			}
			select {
			case size, ok := <-in:
				if !ok {
					in = nil
					continue
				}
				f.mu.Lock()
				c.resizes = append(c.resizes, size)
				f.mu.Unlock()
				queue = append(queue, size)
			case deliver <- next:
				queue = queue[1:]
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, func() {
		close(quit)
		<-done
	}
}

// Resizes returns the TTY sizes applied to container id's main process (through
// Attach) and to its execs, in order; nil when there is no such container.
func (f *Fake) Resizes(id string) []docker.TerminalSize {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		return nil
	}
	return slices.Clone(c.resizes)
}

// Active returns how many calls of method (Exec, Attach or ContainerLogs, the calls
// that last) the engine accepted and that have not returned yet.
func (f *Fake) Active(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active[method]
}

// begin counts an accepted call of method as active until the returned end is
// called. Caller holds mu; end must be called without it.
func (f *Fake) begin(method string) (end func()) {
	f.active[method]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active[method]--
	}
}

// AttachedStdin returns what container id's main process read from the stdins of
// Attach calls, in order ("" when there is no such container).
func (f *Fake) AttachedStdin(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		return c.stdin.String()
	}
	return ""
}

// stdinRecorder records what is read from an attached stdin as container c's input.
type stdinRecorder struct {
	f *Fake
	c *fakeContainer
	r io.Reader
}

func (s *stdinRecorder) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.f.mu.Lock()
	s.c.stdin.Write(p[:n])
	s.f.mu.Unlock()
	return n, err
}
