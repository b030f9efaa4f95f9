package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// newEngine returns a fake engine holding the image "busybox", whose execs run
// runCommand and whose attaches run attachEcho. Execs of "sleep" are released when
// the test's cleanups run.
func newEngine(t *testing.T) *dockertest.Fake {
	t.Helper()
	f := dockertest.New()
	f.AddImage(dockertest.Image(1, "busybox:latest"))
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	f.SetExecHandler(func(_ string, opts docker.ExecOptions) (int, error) { return runCommand(opts, released) })
	f.SetAttachHandler(func(id string, opts docker.AttachOptions) error { return attachEcho(f, id, opts) })
	return f
}

// addContainer creates container name in the engine, running with the given init
// pid or in state.
func addContainer(t *testing.T, f *dockertest.Fake, name, state string, pid int) {
	t.Helper()
	ctx := context.Background()
	id, err := f.CreateContainer(ctx, docker.ContainerSpec{Name: name, Image: "busybox"})
	assert.NilError(t, err)
	if state != docker.StateRunning {
		f.SetContainerState(id, state, 0)
		return
	}
	assert.NilError(t, f.StartContainer(ctx, id))
	f.SetPid(id, pid)
}

// runCommand runs one exec's command:
//
//	echo ARGS...  prints ARGS to stdout
//	warn ARGS...  prints ARGS to stderr
//	exit N        exits with N
//	cat           copies stdin to stdout
//	tty           prints each TTY size until the sizes end ("WxH" lines)
//	sleep         blocks until released (the engine returns when the exec's context ends)
func runCommand(opts docker.ExecOptions, released <-chan struct{}) (int, error) {
	out, errOut := orDiscard(opts.Stdout), orDiscard(opts.Stderr)
	if opts.Tty {
		errOut = out
	}
	args := opts.Cmd[1:]
	var err error
	switch opts.Cmd[0] {
	case "echo":
		_, err = fmt.Fprintln(out, strings.Join(args, " "))
	case "warn":
		_, err = fmt.Fprintln(errOut, strings.Join(args, " "))
	case "exit":
		return strconv.Atoi(args[0])
	case "cat":
		if opts.Stdin != nil {
			_, err = io.Copy(out, opts.Stdin)
		}
	case "tty":
		if opts.Resize == nil {
			fmt.Fprintln(errOut, "not a tty")
			return 1, nil
		}
		for s := range opts.Resize {
			fmt.Fprintf(out, "%dx%d\n", s.Width, s.Height)
		}
	case "sleep":
		<-released
		return -1, errors.New("released")
	default:
		fmt.Fprintf(errOut, "%s: not found\n", opts.Cmd[0])
		return 127, nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// attachEcho prints "attached to NAME", then echoes stdin (which the engine records
// as the main process's input) and takes the TTY sizes, until both end.
func attachEcho(f *dockertest.Fake, id string, opts docker.AttachOptions) error {
	d, err := f.InspectContainer(context.Background(), id)
	if err != nil {
		return err
	}
	out := orDiscard(opts.Stdout)
	if _, err := fmt.Fprintf(out, "attached to %s\n", d.Name); err != nil {
		return err
	}
	if opts.Stdin != nil {
		b, err := io.ReadAll(opts.Stdin)
		if err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	if opts.Resize != nil {
		for range opts.Resize { // recorded by the engine
		}
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// testLogger logs to the test's log until the test's cleanups have run.
func testLogger(t *testing.T) logrus.FieldLogger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	l := logrus.New()
	l.SetOutput(w)
	l.SetLevel(logrus.DebugLevel)
	return l
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}

// newTestServer starts a server on loopback over engine; it is closed when the test
// ends (and must then have no stream left running).
func newTestServer(t *testing.T, engine Engine) *Server {
	t.Helper()
	log := testLogger(t)
	s, err := New(Config{}, engine, log)
	assert.NilError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		assert.NilError(t, s.Close())
		assert.NilError(t, <-served)
	})
	return s
}

// testRuntime is the runtime of a server that is not serving, for calling the
// Runtime methods directly.
func testRuntime(t *testing.T, engine Engine) *runtime {
	t.Helper()
	log := testLogger(t)
	s, err := New(Config{}, engine, log)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.NilError(t, s.Close()) })
	return &runtime{engine: engine, log: log, s: s}
}

// hostNetEngine is an engine with the running host-network sandbox "hostnet", and
// the port of a listener on the host answering "host".
func hostNetEngine(t *testing.T) (*dockertest.Fake, int) {
	t.Helper()
	port, err := listenAnswers(t, "127.0.0.1:0", "host")
	assert.NilError(t, err)
	engine := newEngine(t)
	// A host-network sandbox shares the shim's network namespace: the test's own.
	addContainer(t, engine, "hostnet", docker.StateRunning, os.Getpid())
	return engine, port
}
