package dockertest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// An exec handler gets every recorded size, and its Resize ends with the caller's.
func TestExecHandlerGetsResizes(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c", Tty: true})
	f.SetExecHandler(func(_ string, opts docker.ExecOptions) (int, error) {
		if opts.Resize == nil {
			return 1, nil
		}
		for s := range opts.Resize {
			_, _ = fmt.Fprintf(opts.Stdout, "%dx%d\n", s.Width, s.Height)
		}
		return 0, nil
	})
	sizes := make(chan docker.TerminalSize)
	go func() {
		sizes <- docker.TerminalSize{Width: 80, Height: 24}
		sizes <- docker.TerminalSize{Width: 1, Height: 65535}
		close(sizes)
	}()
	var out strings.Builder
	code, err := f.Exec(context.Background(), id, docker.ExecOptions{Cmd: []string{"tty"}, Tty: true, Stdout: &out, Resize: sizes})
	assert.NilError(t, err)
	assert.Equal(t, code, 0)
	assert.Equal(t, out.String(), "80x24\n1x65535\n")
	assert.DeepEqual(t, f.Resizes(id), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 1, Height: 65535}})

	// Without a TTY the handler gets no sizes.
	code, err = f.Exec(context.Background(), id, docker.ExecOptions{Cmd: []string{"tty"}, Stdout: &out, Resize: make(chan docker.TerminalSize)})
	assert.NilError(t, err)
	assert.Equal(t, code, 1)
}

func TestActive(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	started, release := make(chan struct{}), make(chan struct{})
	f.SetExecHandler(func(string, docker.ExecOptions) (int, error) {
		close(started)
		<-release
		return 0, nil
	})
	assert.Equal(t, f.Active("Exec"), 0)
	done := make(chan error, 1)
	go func() {
		_, err := f.Exec(context.Background(), id, docker.ExecOptions{Cmd: []string{"sleep"}})
		done <- err
	}()
	<-started
	assert.Equal(t, f.Active("Exec"), 1)
	close(release)
	assert.NilError(t, <-done)
	assert.Equal(t, f.Active("Exec"), 0)

	// A call the engine refuses is never active; one ended by its context is no more.
	_, err := f.Exec(context.Background(), "missing", docker.ExecOptions{})
	assert.Assert(t, err != nil)
	ctx, cancel := context.WithCancel(context.Background())
	logsDone := make(chan error, 1)
	go func() { logsDone <- f.ContainerLogs(ctx, id, docker.LogsOptions{Follow: true, Stdout: io.Discard}) }()
	f.AppendLog(id, "stdout", "wake", time.Now()) // the follow may or may not be active yet
	cancel()
	assert.ErrorIs(t, <-logsDone, context.Canceled)
	assert.Equal(t, f.Active("ContainerLogs"), 0)
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})

	_, err := f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}})
	assert.Assert(t, cerrdefs.IsFailedPrecondition(err), "created, not running: %v", err)
	_, err = f.Exec(ctx, "missing", docker.ExecOptions{Cmd: []string{"true"}})
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)

	assert.NilError(t, f.StartContainer(ctx, id))
	var stdout bytes.Buffer
	code, err := f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}, Stdout: &stdout})
	assert.NilError(t, err)
	assert.Equal(t, code, 0, "the default handler succeeds")
	assert.Equal(t, stdout.Len(), 0)

	var gotID string
	f.SetExecHandler(func(id string, opts docker.ExecOptions) (int, error) {
		gotID = id
		in, _ := io.ReadAll(opts.Stdin)
		_, _ = fmt.Fprintf(opts.Stdout, "%s:%s", strings.Join(opts.Cmd, " "), in)
		_, _ = io.WriteString(opts.Stderr, "warning")
		return 2, nil
	})
	var stderr bytes.Buffer
	stdout.Reset()
	code, err = f.Exec(ctx, id[:12], docker.ExecOptions{Cmd: []string{"cat"}, Stdin: strings.NewReader("in"), Stdout: &stdout, Stderr: &stderr})
	assert.NilError(t, err)
	assert.Equal(t, code, 2)
	assert.Equal(t, gotID, id, "the handler gets the full ID")
	assert.Equal(t, stdout.String(), "cat:in")
	assert.Equal(t, stderr.String(), "warning")

	f.SetExecHandler(func(string, docker.ExecOptions) (int, error) { return 0, errors.New("exec broke") })
	_, err = f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"x"}})
	assert.ErrorContains(t, err, "exec broke")

	release := make(chan struct{})
	defer close(release)
	f.SetExecHandler(func(string, docker.ExecOptions) (int, error) {
		<-release
		return 0, nil
	})
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = f.Exec(tctx, id, docker.ExecOptions{Cmd: []string{"sleep", "inf"}})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	f.SetExecHandler(nil)
	code, err = f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}})
	assert.NilError(t, err)
	assert.Equal(t, code, 0)
}

func TestAttach(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c", OpenStdin: true})

	err := f.Attach(ctx, id, docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, cerrdefs.IsFailedPrecondition(err), "created, not running: %v", err)
	assert.ErrorContains(t, err, "attach to container "+id+": container is not running (created)")
	err = f.Attach(ctx, "missing", docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)
	assert.NilError(t, f.StartContainer(ctx, id))

	// The default echoes stdin to stdout until it ends.
	var stdout bytes.Buffer
	assert.NilError(t, f.Attach(ctx, id[:12], docker.AttachOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout}))
	assert.Equal(t, stdout.String(), "hello\n")

	// Without stdin it lasts until ctx ends...
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = f.Attach(tctx, id, docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	var gotID string
	f.SetAttachHandler(func(id string, opts docker.AttachOptions) error {
		gotID = id
		in, _ := io.ReadAll(opts.Stdin)
		_, _ = fmt.Fprintf(opts.Stdout, "out:%s", in)
		_, _ = io.WriteString(opts.Stderr, "warning")
		for size := range opts.Resize { // until the caller's sizes end
			_, _ = fmt.Fprintf(opts.Stdout, " %dx%d", size.Width, size.Height)
		}
		return nil
	})
	var stderr bytes.Buffer
	stdout.Reset()
	sizes := make(chan docker.TerminalSize, 1)
	sizes <- docker.TerminalSize{Width: 80, Height: 24}
	close(sizes)
	err = f.Attach(ctx, "c", docker.AttachOptions{Stdin: strings.NewReader("in"), Stdout: &stdout, Stderr: &stderr, Tty: true, Resize: sizes})
	assert.NilError(t, err)
	assert.Equal(t, gotID, id, "the handler gets the full ID")
	assert.Equal(t, stdout.String(), "out:in 80x24", "the handler gets the recorded sizes")
	assert.Equal(t, stderr.String(), "warning")
	assert.Equal(t, f.AttachedStdin(id), "hello\nin", "what the process read from every attach")
	assert.Equal(t, f.AttachedStdin("missing"), "")

	f.SetAttachHandler(func(string, docker.AttachOptions) error { return errors.New("attach broke") })
	assert.ErrorContains(t, f.Attach(ctx, id, docker.AttachOptions{Stdout: io.Discard}), "attach broke")

	release := make(chan struct{})
	defer close(release)
	f.SetAttachHandler(func(string, docker.AttachOptions) error {
		<-release
		return nil
	})
	tctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = f.Attach(tctx, id, docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	f.SetAttachHandler(nil)
	stdout.Reset()
	assert.NilError(t, f.Attach(ctx, id, docker.AttachOptions{Stdin: strings.NewReader("again"), Stdout: &stdout}))
	assert.Equal(t, stdout.String(), "again")
}

// attachInBackground runs Attach with opts and returns its result channel once the
// fake has accepted the call (found the container running).
func attachInBackground(t *testing.T, f *dockertest.Fake, id string, opts docker.AttachOptions) <-chan error {
	t.Helper()
	active := f.Active("Attach")
	done := make(chan error, 1)
	go func() { done <- f.Attach(context.Background(), id, opts) }()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if f.Active("Attach") > active {
			return poll.Success()
		}
		return poll.Continue("attach not accepted yet")
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
	return done
}

func TestAttachEndsWhenContainerStops(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c", OpenStdin: true})
	assert.NilError(t, f.StartContainer(ctx, id))

	// Waiting without stdin, and echoing a stdin that stays open, both end with the process.
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout bytes.Buffer
	waiting := attachInBackground(t, f, id, docker.AttachOptions{Stdout: io.Discard, Stderr: io.Discard})
	echoing := attachInBackground(t, f, id, docker.AttachOptions{Stdin: stdinR, Stdout: &stdout})
	f.SetContainerState(id, docker.StateExited, 137)
	for _, done := range []<-chan error{waiting, echoing} {
		select {
		case err := <-done:
			assert.NilError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("attach outlived the container's process")
		}
	}
	// The echo's stdin copy writes nothing after Attach returned.
	_, err := io.WriteString(stdinW, "late")
	assert.NilError(t, err)
	assert.Equal(t, stdout.Len(), 0)

	assert.NilError(t, f.StartContainer(ctx, id))
	removed := attachInBackground(t, f, id, docker.AttachOptions{Stdout: io.Discard})
	assert.NilError(t, f.RemoveContainer(ctx, id))
	select {
	case err := <-removed:
		assert.NilError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("attach outlived the container")
	}
}

// receive takes n sizes from a handler's Resize (recorded by then).
func receive(sizes <-chan docker.TerminalSize, n int) {
	for range n {
		<-sizes
	}
}

func TestResizes(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c", Tty: true})
	assert.NilError(t, f.StartContainer(ctx, id))
	assert.Assert(t, f.Resizes(id) == nil)
	assert.Assert(t, f.Resizes("missing") == nil)

	// Attach and exec sizes are recorded in order while the call lasts.
	f.SetAttachHandler(func(_ string, opts docker.AttachOptions) error {
		receive(opts.Resize, 2)
		return nil
	})
	f.SetExecHandler(func(_ string, opts docker.ExecOptions) (int, error) {
		receive(opts.Resize, 1)
		return 0, nil
	})
	sizes := make(chan docker.TerminalSize)
	go func() {
		sizes <- docker.TerminalSize{Width: 80, Height: 24}
		sizes <- docker.TerminalSize{Width: 100, Height: 30}
	}()
	assert.NilError(t, f.Attach(ctx, id, docker.AttachOptions{Tty: true, Stdout: io.Discard, Resize: sizes}))
	assert.DeepEqual(t, f.Resizes(id), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 100, Height: 30}})
	go func() { sizes <- docker.TerminalSize{Width: 120, Height: 40} }()
	_, err := f.Exec(ctx, "c", docker.ExecOptions{Cmd: []string{"sh"}, Tty: true, Resize: sizes})
	assert.NilError(t, err)
	assert.DeepEqual(t, f.Resizes(id), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 100, Height: 30}, {Width: 120, Height: 40}})

	// Nothing reads the sizes once the call returned, nor without a TTY.
	f.SetAttachHandler(nil)
	f.SetExecHandler(nil)
	_, err = f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}, Resize: sizes})
	assert.NilError(t, err)
	assert.NilError(t, f.Attach(ctx, id, docker.AttachOptions{Stdin: strings.NewReader(""), Stdout: io.Discard, Resize: sizes}))
	select {
	case sizes <- docker.TerminalSize{Width: 1, Height: 1}:
		t.Fatal("a size was read after the call returned")
	case <-time.After(50 * time.Millisecond):
	}
	assert.Equal(t, len(f.Resizes(id)), 3)
}
