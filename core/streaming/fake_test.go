package streaming

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// fakeEngine is an in-memory engine: containers with their state, a few commands
// that exec understands, and what each container's TTY and main process received.
type fakeEngine struct {
	mu         sync.Mutex
	containers map[string]*fakeContainer
	// running counts execs and attaches in progress.
	running int
}

type fakeContainer struct {
	details docker.ContainerDetails
	// sizes are the TTY sizes applied by execs and attaches, in order.
	sizes []docker.TerminalSize
	// stdin is what attaches delivered to the main process.
	stdin bytes.Buffer
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{containers: map[string]*fakeContainer{}}
}

// add creates a container in state with the given init pid.
func (f *fakeEngine) add(id, state string, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[id] = &fakeContainer{details: docker.ContainerDetails{
		Container: docker.Container{ID: id, Name: id, State: state},
		Pid:       pid,
	}}
}

func (f *fakeEngine) sizes(id string) []docker.TerminalSize {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]docker.TerminalSize(nil), f.containers[id].sizes...)
}

func (f *fakeEngine) stdin(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.containers[id].stdin.String()
}

func (f *fakeEngine) inFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running
}

// runningContainer returns the container when it runs, with the engine's error kinds.
func (f *fakeEngine) runningContainer(id string) (*fakeContainer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("no such container %s: %w", id, cerrdefs.ErrNotFound)
	}
	if c.details.State != docker.StateRunning {
		return nil, fmt.Errorf("container %s is not running: %w", id, cerrdefs.ErrFailedPrecondition)
	}
	f.running++
	return c, nil
}

func (f *fakeEngine) done() {
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
}

// recordSizes applies every size from sizes to c's TTY until the channel is closed,
// writing "WxH" lines to out.
func (f *fakeEngine) recordSizes(c *fakeContainer, sizes <-chan docker.TerminalSize, out io.Writer) {
	for s := range sizes {
		f.mu.Lock()
		c.sizes = append(c.sizes, s)
		f.mu.Unlock()
		if out != nil {
			fmt.Fprintf(out, "%dx%d\n", s.Width, s.Height)
		}
	}
}

// Exec understands these commands:
//
//	echo ARGS...  prints ARGS to stdout
//	warn ARGS...  prints ARGS to stderr
//	exit N        exits with N
//	cat           copies stdin to stdout
//	tty           prints each TTY size until the sizes end ("WxH" lines)
//	sleep         blocks until the context ends
func (f *fakeEngine) Exec(ctx context.Context, id string, opts docker.ExecOptions) (int, error) {
	c, err := f.runningContainer(id)
	if err != nil {
		return -1, err
	}
	defer f.done()
	out, errOut := orDiscard(opts.Stdout), orDiscard(opts.Stderr)
	if opts.Tty {
		errOut = out
	}
	args := opts.Cmd[1:]
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
		if !opts.Tty || opts.Resize == nil {
			fmt.Fprintln(errOut, "not a tty")
			return 1, nil
		}
		f.recordSizes(c, opts.Resize, out)
	case "sleep":
		<-ctx.Done()
		return -1, ctx.Err()
	default:
		fmt.Fprintf(errOut, "%s: not found\n", opts.Cmd[0])
		return 127, nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// Attach prints "attached to ID", then delivers stdin to the main process (which
// echoes it) and applies TTY sizes, until both end.
func (f *fakeEngine) Attach(ctx context.Context, id string, opts docker.AttachOptions) error {
	c, err := f.runningContainer(id)
	if err != nil {
		return err
	}
	defer f.done()
	out := orDiscard(opts.Stdout)
	if _, err := fmt.Fprintf(out, "attached to %s\n", id); err != nil {
		return err
	}
	var wg sync.WaitGroup
	if opts.Resize != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.recordSizes(c, opts.Resize, nil)
		}()
	}
	if opts.Stdin != nil {
		b, err := io.ReadAll(opts.Stdin)
		f.mu.Lock()
		c.stdin.Write(b)
		f.mu.Unlock()
		if err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	wg.Wait()
	return nil
}

// InspectContainer returns the container's details or NotFound.
func (f *fakeEngine) InspectContainer(_ context.Context, id string) (docker.ContainerDetails, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return docker.ContainerDetails{}, fmt.Errorf("no such container %s: %w", id, cerrdefs.ErrNotFound)
	}
	return c.details, nil
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
