package dockertest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/core/docker/dockertest"
)

// running returns a fake engine with one running container of spec.
func running(t *testing.T, spec docker.ContainerSpec) (*dockertest.Fake, string) {
	t.Helper()
	f := withPause()
	id := create(t, f, spec)
	assert.NilError(t, f.StartContainer(context.Background(), id))
	return f, id
}

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

func TestSetPid(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	f.SetPid(id, os.Getpid())
	d, err := f.InspectContainer(context.Background(), "c")
	assert.NilError(t, err)
	assert.Equal(t, d.Pid, os.Getpid())

	f.SetContainerState(id, docker.StateExited, 0)
	f.SetPid(id, 42) // not running: no process to name
	d, err = f.InspectContainer(context.Background(), id)
	assert.NilError(t, err)
	assert.Equal(t, d.Pid, 0)
	f.SetPid("missing", 42)
}

func TestLogDataAndChunks(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 1, time.UTC)
	f.AppendLogData(id, "stdout", "0123456789", t0) // the engine cut a long line
	f.AppendLogData(id, "stdout", "end\n", t0.Add(1))
	f.AppendLogData(id, "stderr", "prompt$ ", t0.Add(2))
	f.SetContainerState(id, docker.StateExited, 0)
	want := "2024-05-01T10:00:00.000000001Z 0123456789" + "2024-05-01T10:00:00.000000002Z end\n"

	for _, chunk := range []int{0, 1, 7} {
		t.Run(fmt.Sprint("chunk ", chunk), func(t *testing.T) {
			f.SetLogChunkSize(chunk)
			stdout, stderr := &writes{}, &writes{}
			assert.NilError(t, f.ContainerLogs(context.Background(), id, docker.LogsOptions{Follow: true, Stdout: stdout, Stderr: stderr}))
			assert.Equal(t, stdout.String(), want)
			assert.Equal(t, stderr.String(), "2024-05-01T10:00:00.000000003Z prompt$ ")
			largest := 0
			for _, w := range stdout.sizes {
				largest = max(largest, w)
			}
			if chunk == 0 {
				assert.Equal(t, len(stdout.sizes), 2, "one write per message")
			} else {
				assert.Equal(t, largest, chunk)
			}
		})
	}
}

// writes records what is written and the size of every Write.
type writes struct {
	buf   strings.Builder
	sizes []int
}

func (w *writes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.buf.Write(p)
}

func (w *writes) String() string { return w.buf.String() }

func TestLogSinceIgnoredAndRequests(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	f.AppendLog(id, "stdout", "old", t0)
	f.AppendLog(id, "stdout", "new", t0.Add(time.Second))
	f.SetContainerState(id, docker.StateExited, 0)
	read := func() string {
		var out strings.Builder
		assert.NilError(t, f.ContainerLogs(context.Background(), "c", docker.LogsOptions{Since: t0.Add(time.Second), Stdout: &out}))
		return out.String()
	}
	assert.Equal(t, read(), "2024-05-01T10:00:01Z new\n")
	f.SetLogSinceIgnored(true)
	assert.Equal(t, read(), "2024-05-01T10:00:00Z old\n2024-05-01T10:00:01Z new\n")

	f.InjectError("ContainerLogs", errors.New("down"))
	assert.ErrorContains(t, f.ContainerLogs(context.Background(), "c", docker.LogsOptions{Follow: true}), "down")
	assert.DeepEqual(t, f.LogsRequests("c"), []docker.LogsOptions{
		{Since: t0.Add(time.Second)}, {Since: t0.Add(time.Second)}, {Follow: true},
	})
	assert.Check(t, is.Len(f.LogsRequests(id), 0), "by reference as passed")
}

func TestBreakLogs(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	for i, line := range []string{"one", "two", "three"} {
		f.AppendLog(id, "stdout", line, t0.Add(time.Duration(i)*time.Second))
	}
	f.SetContainerState(id, docker.StateExited, 0)
	broken := errors.New("connection reset")
	read := func() (string, error) {
		var out strings.Builder
		err := f.ContainerLogs(context.Background(), id, docker.LogsOptions{Stdout: &out})
		return out.String(), err
	}

	f.BreakLogs(id, 1, 22, broken)
	got, err := read()
	assert.ErrorIs(t, err, broken)
	assert.Equal(t, got, "2024-05-01T10:00:00Z one\n2024-05-01T10:00:01Z t", "one message and 22 bytes of the next")
	got, err = read()
	assert.NilError(t, err, "the break happens once")
	assert.Equal(t, strings.Count(got, "\n"), 3)

	// A call that ends first leaves the break to the next one that gets there.
	f.BreakLogs(id, 3, 0, broken)
	_, err = read()
	assert.NilError(t, err)
	f.AppendLog(id, "stdout", "four", t0.Add(3*time.Second))
	got, err = read()
	assert.ErrorIs(t, err, broken)
	assert.Equal(t, strings.Count(got, "\n"), 3)
	f.BreakLogs("missing", 0, 0, broken)
}
