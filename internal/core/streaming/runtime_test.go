package streaming

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// sink is an output stream that remembers what it got and whether it was closed.
type sink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *sink) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func TestExec(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	addContainer(t, engine, "stopped", docker.StateExited, 0)
	r := testRuntime(t, engine)

	tests := []struct {
		name       string
		id         string
		cmd        []string
		stdin      string
		wantOut    string
		wantErrOut string
		wantCode   int // exit code carried by a utilexec.ExitError; 0 = no such error
		wantKind   error
	}{
		{name: "success", id: "c1", cmd: []string{"echo", "hello", "world"}, wantOut: "hello world\n"},
		{name: "stderr", id: "c1", cmd: []string{"warn", "careful"}, wantErrOut: "careful\n"},
		{name: "stdin", id: "c1", cmd: []string{"cat"}, stdin: "from stdin", wantOut: "from stdin"},
		{name: "exit code", id: "c1", cmd: []string{"exit", "3"}, wantCode: 3},
		{name: "command not found", id: "c1", cmd: []string{"nope"}, wantErrOut: "nope: not found\n", wantCode: 127},
		{name: "missing container", id: "gone", cmd: []string{"echo"}, wantKind: cerrdefs.ErrNotFound},
		{name: "stopped container", id: "stopped", cmd: []string{"echo"}, wantKind: cerrdefs.ErrFailedPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdin io.Reader
			if tc.stdin != "" {
				stdin = strings.NewReader(tc.stdin)
			}
			out, errOut := &sink{}, &sink{}
			err := r.Exec(context.Background(), tc.id, tc.cmd, stdin, out, errOut, false, nil)
			switch {
			case tc.wantKind != nil:
				assert.Assert(t, errors.Is(err, tc.wantKind), "got %v", err)
				var exitErr utilexec.ExitError
				assert.Assert(t, !errors.As(err, &exitErr), "an engine failure is not an exit status")
			case tc.wantCode != 0:
				// The library sends the exit status to the client only for this type, which
				// it finds with a type assertion: the error must not be wrapped.
				exitErr, ok := err.(utilexec.ExitError) //nolint:errorlint // see above
				assert.Assert(t, ok, "got %T %v", err, err)
				assert.Check(t, exitErr.Exited())
				assert.Check(t, is.Equal(exitErr.ExitStatus(), tc.wantCode))
			default:
				assert.NilError(t, err)
			}
			assert.Check(t, is.Equal(out.String(), tc.wantOut))
			assert.Check(t, is.Equal(errOut.String(), tc.wantErrOut))
			if tc.wantKind == nil {
				assert.Check(t, out.isClosed() && errOut.isClosed(), "output streams are closed at the end")
			}
		})
	}
	assert.Equal(t, engine.Active("Exec"), 0)
}

// TestExecResize checks that the library's terminal sizes reach the engine in order,
// and that the forwarding ends with the exec.
func TestExecResize(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	r := testRuntime(t, engine)

	resize := make(chan remotecommand.TerminalSize)
	out := &sink{}
	done := make(chan error, 1)
	go func() { done <- r.Exec(context.Background(), "c1", []string{"tty"}, nil, out, nil, true, resize) }()
	sizes := []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}, {Width: 1, Height: 65535}}
	for _, s := range sizes {
		resize <- s
	}
	close(resize) // the client's resize stream ended: the engine's channel closes too
	assert.NilError(t, <-done)
	assert.Equal(t, out.String(), "80x24\n120x40\n1x65535\n")
	assert.DeepEqual(t, engine.Resizes("c1"), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}, {Width: 1, Height: 65535}})
}

func TestTranslateResizeStops(t *testing.T) {
	in := make(chan remotecommand.TerminalSize, 1)
	out, stop := translateResize(in)
	in <- remotecommand.TerminalSize{Width: 10, Height: 20}
	// Nobody reads out any more (the exec ended): stop must not hang on the pending size.
	stop()
	_, open := <-out
	assert.Assert(t, !open, "the engine's channel is closed once stopped")

	none, stop := translateResize(nil)
	assert.Assert(t, none == nil)
	stop()
}

func TestAttach(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	r := testRuntime(t, engine)

	t.Run("tty with stdin and resize", func(t *testing.T) {
		resize := make(chan remotecommand.TerminalSize)
		out := &sink{}
		done := make(chan error, 1)
		go func() {
			done <- r.Attach(context.Background(), "c1", strings.NewReader("ls\n"), out, nil, true, resize)
		}()
		resize <- remotecommand.TerminalSize{Width: 100, Height: 30}
		close(resize)
		assert.NilError(t, <-done)
		assert.Equal(t, out.String(), "attached to c1\nls\n")
		assert.Equal(t, engine.AttachedStdin("c1"), "ls\n")
		assert.DeepEqual(t, engine.Resizes("c1"), []docker.TerminalSize{{Width: 100, Height: 30}})
		assert.Assert(t, out.isClosed())
	})
	t.Run("output only", func(t *testing.T) {
		out, errOut := &sink{}, &sink{}
		assert.NilError(t, r.Attach(context.Background(), "c1", nil, out, errOut, false, nil))
		assert.Equal(t, out.String(), "attached to c1\n")
	})
	t.Run("missing container", func(t *testing.T) {
		err := r.Attach(context.Background(), "gone", nil, &sink{}, nil, false, nil)
		assert.Assert(t, errors.Is(err, cerrdefs.ErrNotFound), "got %v", err)
	})
}
