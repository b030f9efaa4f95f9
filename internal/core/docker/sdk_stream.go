package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// execPollInterval is how often Exec asks the engine whether a process whose
// output stream has ended has exited yet.
const execPollInterval = 10 * time.Millisecond

// execCleanupTimeout bounds the engine calls Exec makes after its context ended
// (finding the process to kill).
const execCleanupTimeout = 5 * time.Second

// resizeAttempts bounds how often one terminal size is tried while the engine
// answers that the process is not running yet (a conflict: it is being started).
const resizeAttempts = 10

// resizeRetryInterval is the pause between those attempts.
const resizeRetryInterval = 20 * time.Millisecond

// Exec runs opts.Cmd in a running container and returns its exit code. When ctx
// ends first, the process is killed (the shim runs on the engine's host) and a
// DeadlineExceeded or Canceled error returned. Output is copied while stdin is still
// open, and the end of opts.Stdin closes the process's stdin. With Tty, the sizes
// from opts.Resize are applied until Exec returns; it reads no more of them then.
// A process that closed its output and runs on is waited for until it exits or ctx
// ends (then it is killed). Exec closes the hijacked connection before it returns;
// a stdin copy blocked in a Read of opts.Stdin cannot be interrupted and outlives
// Exec until that Read returns (a write then fails on the closed connection).
func (c *SDKClient) Exec(ctx context.Context, id string, opts ExecOptions) (int, error) {
	op := "exec in container " + id
	created, err := c.api.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd:          opts.Cmd,
		Tty:          opts.Tty,
		AttachStdin:  opts.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			// The engine answers 409 for a container that is not running (or paused).
			return -1, classifyAs(op, err, cerrdefs.ErrFailedPrecondition)
		}
		return -1, classify(op, err)
	}
	hijacked, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: opts.Tty})
	if err != nil {
		return -1, classify(op, err)
	}
	defer hijacked.Close()
	if opts.Tty && opts.Resize != nil {
		// The attach has started the process, or the engine is starting it: it holds
		// an exec resize until the process has started.
		stop := applyResizes(ctx, opts.Resize, func(ctx context.Context, size container.ResizeOptions) error {
			return c.api.ContainerExecResize(ctx, created.ID, size)
		})
		defer stop()
	}

	session := hijackedSession{conn: &hijacked, tty: opts.Tty, stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr}
	var killErr error
	// When ctx ends, the process is killed first, then the connection closed.
	interrupted, err := session.relay(ctx, func() { killErr = c.killExec(ctx, created.ID) })
	if interrupted {
		return -1, classify(op, ctxEnded(ctx, killErr))
	}
	if err != nil && ctx.Err() == nil {
		// The client went away (its stream failed): the process would run on
		// unseen, for as long as it likes.
		return -1, classify(op, errors.Join(err, c.killExec(ctx, created.ID)))
	}
	if ctx.Err() == nil {
		code, err := c.execExitCode(ctx, created.ID)
		if ctx.Err() == nil {
			return code, classify(op, err)
		}
	}
	// ctx ended while waiting for the exit code: the process may still run.
	return -1, classify(op, ctxEnded(ctx, c.killExec(ctx, created.ID)))
}

// applyResizes applies each terminal size from sizes with resize, in a goroutine,
// until sizes is closed or stop is called; stop waits for the goroutine to end, so
// none outlives the caller. A size the engine refuses is dropped (the TTY keeps its
// last size), except that one refused with a conflict (the process is not running
// yet) is tried again briefly, or replaced by a newer size if one comes meanwhile.
func applyResizes(ctx context.Context, sizes <-chan TerminalSize, resize func(context.Context, container.ResizeOptions) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case size, ok := <-sizes:
				if !ok || !resizeWithRetry(ctx, sizes, size, resize) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// resizeWithRetry applies size as applyResizes describes. It returns false when
// sizes was closed or ctx ended meanwhile.
func resizeWithRetry(ctx context.Context, sizes <-chan TerminalSize, size TerminalSize, resize func(context.Context, container.ResizeOptions) error) bool {
	for attempt := 1; ; attempt++ {
		err := resize(ctx, container.ResizeOptions{Height: uint(size.Height), Width: uint(size.Width)})
		if err == nil || !cerrdefs.IsConflict(err) || attempt >= resizeAttempts {
			return ctx.Err() == nil
		}
		retry := time.NewTimer(resizeRetryInterval)
		select {
		case newer, ok := <-sizes:
			retry.Stop()
			if !ok {
				return false
			}
			size = newer
		case <-retry.C:
		case <-ctx.Done():
			retry.Stop()
			return false
		}
	}
}

// Attach connects opts' streams to a running container's main process until its
// output ends (the process exited: nil) or ctx ends (the connection is closed and a
// DeadlineExceeded or Canceled error returned). A missing container is NotFound; one
// that is not running (or is paused or restarting) is FailedPrecondition, checked
// first because the engine accepts an attach to a stopped container and never ends
// it. With a TTY, output is copied raw to opts.Stdout and the sizes from opts.Resize
// are applied until Attach returns. The end of opts.Stdin half-closes the
// connection (detaching stdin, or closing it for a StdinOnce container); a stdin
// copy blocked in a Read of opts.Stdin cannot be interrupted and outlives Attach
// until that Read returns.
func (c *SDKClient) Attach(ctx context.Context, id string, opts AttachOptions) error {
	op := "attach to container " + id
	in, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return classify(op, err)
	}
	if err := notAttachable(in); err != nil {
		return classifyAs(op, err, cerrdefs.ErrFailedPrecondition)
	}
	// The engine decides how the output is framed: raw with a TTY, multiplexed otherwise.
	tty := opts.Tty
	if in.Config != nil {
		tty = in.Config.Tty
	}
	hijacked, err := c.api.ContainerAttach(ctx, id, container.AttachOptions{
		Stream: true,
		Stdin:  opts.Stdin != nil,
		Stdout: opts.Stdout != nil,
		Stderr: opts.Stderr != nil,
	})
	if err != nil {
		return c.attachRefused(ctx, op, id, err)
	}
	defer hijacked.Close()
	if tty && opts.Resize != nil {
		stop := applyResizes(ctx, opts.Resize, func(ctx context.Context, size container.ResizeOptions) error {
			return c.api.ContainerResize(ctx, id, size)
		})
		defer stop()
	}

	session := hijackedSession{conn: &hijacked, tty: tty, stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr}
	interrupted, err := session.relay(ctx, nil)
	if interrupted || (err != nil && ctx.Err() != nil) {
		return classify(op, ctx.Err())
	}
	return classify(op, err)
}

// hijackedSession is a hijacked exec or attach connection and the caller's streams
// it relays.
type hijackedSession struct {
	conn *types.HijackedResponse
	// tty tells that the output is raw; without a TTY it is multiplexed.
	tty    bool
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// relay copies stdin (when not nil) to the connection, half-closing its write side
// at stdin's end (which closes the process's stdin, or detaches it), and the
// connection's output to stdout and stderr, as copyStreams does. It returns the
// output copy's error when the output ends (the process exited or the connection
// failed). When ctx ends first, it calls interrupt (when not nil) while the
// connection is still open, then closes the connection, waits for the output copy to
// end on it and returns interrupted true. The stdin copy ends at stdin's end or,
// once the connection is closed, at its next write; a Read blocked in stdin cannot be
// interrupted and outlives relay until it returns.
func (s hijackedSession) relay(ctx context.Context, interrupt func()) (interrupted bool, outputErr error) {
	if s.stdin != nil {
		go func() {
			_, _ = io.Copy(s.conn.Conn, s.stdin)
			_ = s.conn.CloseWrite()
		}()
	}
	output := make(chan error, 1)
	go func() { output <- copyStreams(s.conn.Reader, s.tty, s.stdout, s.stderr) }()

	select {
	case err := <-output:
		return false, err
	case <-ctx.Done():
		if interrupt != nil {
			interrupt()
		}
		s.conn.Close()
		<-output //nolint:errcheck // the copy fails on the closed connection; ctx ending is the error
		return true, nil
	}
}

// notAttachable tells why a container's main process cannot be attached to, if it cannot.
func notAttachable(in container.InspectResponse) error {
	if in.ContainerJSONBase == nil || in.State == nil {
		return nil // the engine will tell
	}
	s := in.State
	switch {
	case s.Paused:
		return errors.New("container is paused")
	case s.Restarting:
		return errors.New("container is restarting")
	case !s.Running:
		return fmt.Errorf("container is not running (%s)", s.Status)
	}
	return nil
}

// attachRefused classifies a failed attach request. The SDK reports the engine's
// refusal of a hijacked request (404, 409) as text only, so the container is
// inspected again to learn the kind: gone (NotFound), or no longer running, paused
// or restarting (FailedPrecondition).
func (c *SDKClient) attachRefused(ctx context.Context, op, id string, err error) error {
	if ctx.Err() != nil {
		return classify(op, err)
	}
	in, inspectErr := c.api.ContainerInspect(ctx, id)
	switch {
	case inspectErr == nil && notAttachable(in) != nil:
		return classifyAs(op, err, cerrdefs.ErrFailedPrecondition)
	case cerrdefs.IsNotFound(inspectErr):
		return classifyAs(op, err, cerrdefs.ErrNotFound)
	}
	return classify(op, err)
}

// ctxEnded is ctx's error, with why the process could not be killed, if it could not.
func ctxEnded(ctx context.Context, killErr error) error {
	if killErr == nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w; %w", ctx.Err(), killErr)
}

// copyStreams copies an attached stream to stdout and stderr: raw with a TTY,
// demultiplexed otherwise. A nil writer discards its stream.
func copyStreams(r io.Reader, tty bool, stdout, stderr io.Writer) error {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if tty {
		_, err := io.Copy(stdout, r)
		return err
	}
	_, err := stdcopy.StdCopy(stdout, stderr, r)
	return err
}

// execExitCode waits for the exec's process to be reported exited (the output
// stream can end a moment before) and returns its exit code.
// A process that closed its output but runs on is polled ever more slowly (up to
// once a second).
func (c *SDKClient) execExitCode(ctx context.Context, execID string) (int, error) {
	wait := execPollInterval
	for {
		in, err := c.api.ContainerExecInspect(ctx, execID)
		if err != nil {
			return -1, err
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
}

// killExec kills the exec's process, which runs on this host. It uses a context
// detached from ctx's cancellation, since ctx has ended.
func (c *SDKClient) killExec(ctx context.Context, execID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), execCleanupTimeout)
	defer cancel()
	in, err := c.api.ContainerExecInspect(ctx, execID)
	if err != nil {
		return fmt.Errorf("find exec process to kill: %w", err)
	}
	if !in.Running || in.Pid <= 0 {
		return nil
	}
	return c.killInContainer(in.Pid, in.ContainerID)
}
