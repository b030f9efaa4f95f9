package streaming

import (
	"context"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// runtime implements the streaming library's Runtime over the engine.
type runtime struct {
	engine Engine
	log    logrus.FieldLogger
	s      *Server
}

// start registers a stream with the server and returns a context that also ends
// when the server closes (the library passes a background context to
// port-forwards); done must be called when the stream ends.
func (r *runtime) start(ctx context.Context, kind string) (context.Context, func(), error) {
	if !r.s.begin() {
		return nil, nil, fmt.Errorf("streaming server is shutting down: %w", cerrdefs.ErrUnavailable)
	}
	open := r.s.open[kind]
	open.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		open.Add(-1)
		r.s.active.Done()
	}, nil
}

// Exec runs cmd in the container with the client's streams. A command that exits
// with a non-zero status returns a utilexec.CodeExitError, which the library sends
// to the client as the exit code (kubectl and crictl exit with it).
func (r *runtime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	ctx, done, err := r.start(ctx, SessionExec)
	if err != nil {
		return err
	}
	defer done()
	log := r.log.WithFields(logrus.Fields{"container": containerID, "tty": tty})
	log.Debug("exec stream started")

	sizes, stopResize := translateResize(resize)
	code, err := r.engine.Exec(ctx, containerID, docker.ExecOptions{
		Cmd:    cmd,
		Tty:    tty,
		Stdin:  in,
		Stdout: writer(out),
		Stderr: writer(errOut),
		Resize: sizes,
	})
	stopResize()
	closeWriters(out, errOut)
	if err != nil {
		streamFailed(ctx, log, err, "exec")
		return fmt.Errorf("exec in container %s: %w", containerID, err)
	}
	log.WithField("exit_code", code).Debug("exec stream ended")
	if code != 0 {
		return utilexec.CodeExitError{
			Err:  fmt.Errorf("command %q exited with %d", strings.Join(cmd, " "), code),
			Code: code,
		}
	}
	return nil
}

// Attach connects the client's streams to the container's main process until its
// output ends or the client goes away. tty is the request's (kubelet sets it from
// the container's configuration).
func (r *runtime) Attach(ctx context.Context, containerID string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	ctx, done, err := r.start(ctx, SessionAttach)
	if err != nil {
		return err
	}
	defer done()
	log := r.log.WithFields(logrus.Fields{"container": containerID, "tty": tty})
	log.Debug("attach stream started")

	sizes, stopResize := translateResize(resize)
	err = r.engine.Attach(ctx, containerID, docker.AttachOptions{
		Stdin:  in,
		Stdout: writer(out),
		Stderr: writer(errOut),
		Tty:    tty,
		Resize: sizes,
	})
	stopResize()
	closeWriters(out, errOut)
	if err != nil {
		streamFailed(ctx, log, err, "attach")
		return fmt.Errorf("attach to container %s: %w", containerID, err)
	}
	log.Debug("attach stream ended")
	return nil
}

// streamFailed logs a stream's error: at debug level when its context ended (the
// client went away or the server is closing: nothing for an operator to act on),
// as a warning otherwise.
func streamFailed(ctx context.Context, log logrus.FieldLogger, err error, kind string) {
	if ctx.Err() != nil {
		log.WithError(err).Debugf("%s stream ended with its client", kind)
		return
	}
	log.WithError(err).Warnf("%s stream failed", kind)
}

// translateResize forwards the library's terminal sizes to the engine's type until
// in is closed or stop is called; stop waits for the forwarding goroutine, and the
// returned channel is closed when it ends. A nil in gives a nil channel.
func translateResize(in <-chan remotecommand.TerminalSize) (<-chan docker.TerminalSize, func()) {
	if in == nil {
		return nil, func() {}
	}
	out := make(chan docker.TerminalSize)
	quit := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer close(out)
		for {
			select {
			case size, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- docker.TerminalSize{Width: size.Width, Height: size.Height}:
				case <-quit:
					return
				}
			case <-quit:
				return
			}
		}
	}()
	return out, func() {
		close(quit)
		<-ended
	}
}

// writer turns an absent stream into a nil io.Writer (not a non-nil interface
// holding a nil value).
func writer(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// closeWriters ends the output streams, so that the client sees their end before
// the exit status.
func closeWriters(ws ...io.WriteCloser) {
	for _, w := range ws {
		if w != nil {
			_ = w.Close()
		}
	}
}
