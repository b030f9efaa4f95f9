package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"gotest.tools/v3/assert"
)

func TestExec(t *testing.T) {
	for _, tc := range []struct {
		name       string
		engine     *execEngine
		stdin      string
		wantOut    string
		wantErr    string
		wantCode   int
		wantInStd  bool
		wantInspct int
	}{
		{
			name: "demultiplexed output and exit code",
			engine: &execEngine{exitCode: 3, output: func(_ []byte, stdout, stderr io.Writer) {
				_, _ = io.WriteString(stdout, "out 1\n")
				_, _ = io.WriteString(stderr, "err 1\n")
				_, _ = io.WriteString(stdout, "out 2\n")
			}},
			wantOut: "out 1\nout 2\n", wantErr: "err 1\n", wantCode: 3, wantInspct: 1,
		},
		{
			name: "stdin copied and closed",
			engine: &execEngine{withIn: true, output: func(stdin []byte, stdout, _ io.Writer) {
				_, _ = stdout.Write(bytes.ToUpper(stdin))
			}},
			stdin: "hello\n", wantOut: "HELLO\n", wantInStd: true, wantInspct: 1,
		},
		{
			name: "tty output is raw",
			engine: &execEngine{tty: true, output: func(_ []byte, stdout, _ io.Writer) {
				_, _ = io.WriteString(stdout, "\x01\x00\x00\x00raw\r\n")
			}},
			wantOut: "\x01\x00\x00\x00raw\r\n", wantInspct: 1,
		},
		{
			name:     "exit code waits for the process to be reported exited",
			engine:   &execEngine{running: 2, exitCode: 7},
			wantCode: 7, wantInspct: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.engine
			c := e.client(t)
			var stdout, stderr bytes.Buffer
			opts := ExecOptions{Cmd: []string{"sh", "-c", "x"}, Tty: e.tty, Stdout: &stdout, Stderr: &stderr}
			if tc.stdin != "" {
				opts.Stdin = strings.NewReader(tc.stdin)
			}
			code, err := c.Exec(context.Background(), "abc", opts)
			assert.NilError(t, err)
			assert.Equal(t, code, tc.wantCode)
			assert.Equal(t, stdout.String(), tc.wantOut)
			assert.Equal(t, stderr.String(), tc.wantErr)
			<-e.done
			e.mu.Lock()
			defer e.mu.Unlock()
			assert.DeepEqual(t, e.created.Cmd, opts.Cmd)
			assert.Equal(t, e.created.Tty, e.tty)
			assert.Assert(t, e.created.AttachStdout && e.created.AttachStderr)
			assert.Equal(t, e.created.AttachStdin, tc.wantInStd)
			assert.Equal(t, e.inspect, tc.wantInspct)
		})
	}
}

func TestExecResize(t *testing.T) {
	e := &execEngine{tty: true}
	c := e.client(t)
	checkResizes(t, &e.resizes, &e.session, func(sizes <-chan TerminalSize, stdout io.Writer) error {
		code, err := c.Exec(context.Background(), "abc", ExecOptions{Cmd: []string{"sh"}, Tty: true, Stdout: stdout, Resize: sizes})
		assert.Check(t, code == 0 || err != nil, "exit code %d", code)
		return err
	})
}

func TestExecWithoutTTYIgnoresResize(t *testing.T) {
	e := &execEngine{}
	c := e.client(t)
	sizes := make(chan TerminalSize)
	_, err := c.Exec(context.Background(), "abc", ExecOptions{Cmd: []string{"true"}, Resize: sizes})
	assert.NilError(t, err)
	assertNotRead(t, sizes)
	_, requests := e.resizes.wait(0)
	assert.Equal(t, requests, 0)
}

func TestExecInteractive(t *testing.T) {
	e := &execEngine{tty: true, session: shell}
	c := e.client(t)
	converse(t, func(stdin io.Reader, stdout io.Writer) error {
		_, err := c.Exec(context.Background(), "abc", ExecOptions{Cmd: []string{"sh"}, Tty: true, Stdin: stdin, Stdout: stdout})
		return err
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Assert(t, e.created.AttachStdin && e.created.Tty)
}

func TestAttach(t *testing.T) {
	for _, tc := range []struct {
		name      string
		engine    *attachEngine
		stdin     string
		noStderr  bool
		wantOut   string
		wantErr   string
		wantQuery map[string]string
	}{
		{
			name: "demultiplexed output",
			engine: &attachEngine{session: func(_ io.Reader, stdout, stderr io.Writer) {
				_, _ = io.WriteString(stdout, "out 1\n")
				_, _ = io.WriteString(stderr, "err 1\n")
				_, _ = io.WriteString(stdout, "out 2\n")
			}},
			wantOut: "out 1\nout 2\n", wantErr: "err 1\n",
			wantQuery: map[string]string{"stream": "1", "stdin": "", "stdout": "1", "stderr": "1", "logs": ""},
		},
		{
			name: "tty output is raw",
			engine: &attachEngine{tty: true, session: func(_ io.Reader, stdout, _ io.Writer) {
				_, _ = io.WriteString(stdout, "\x01\x00\x00\x00raw\r\n")
			}},
			wantOut:   "\x01\x00\x00\x00raw\r\n",
			wantQuery: map[string]string{"stream": "1", "stdout": "1", "stderr": "1"},
		},
		{
			name: "stdin forwarded and closed",
			engine: &attachEngine{session: func(stdin io.Reader, stdout, _ io.Writer) {
				in, _ := io.ReadAll(stdin) // to the client's close-write
				_, _ = stdout.Write(bytes.ToUpper(in))
			}},
			stdin: "hello\n", noStderr: true,
			wantOut:   "HELLO\n",
			wantQuery: map[string]string{"stream": "1", "stdin": "1", "stdout": "1", "stderr": ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.engine
			c := e.client(t)
			var stdout, stderr bytes.Buffer
			opts := AttachOptions{Tty: e.tty, Stdout: &stdout}
			if !tc.noStderr {
				opts.Stderr = &stderr
			}
			if tc.stdin != "" {
				opts.Stdin = strings.NewReader(tc.stdin)
			}
			assert.NilError(t, c.Attach(context.Background(), "abc", opts))
			assert.Equal(t, stdout.String(), tc.wantOut)
			assert.Equal(t, stderr.String(), tc.wantErr)
			<-e.done
			e.mu.Lock()
			defer e.mu.Unlock()
			for k, v := range tc.wantQuery {
				assert.Equal(t, e.query.Get(k), v, "query %s", k)
			}
		})
	}
}

func TestAttachInteractive(t *testing.T) {
	e := &attachEngine{tty: true, session: shell}
	c := e.client(t)
	converse(t, func(stdin io.Reader, stdout io.Writer) error {
		return c.Attach(context.Background(), "abc", AttachOptions{Tty: true, Stdin: stdin, Stdout: stdout})
	})
}

func TestAttachResize(t *testing.T) {
	e := &attachEngine{tty: true, resizes: resizeLog{conflicts: 2}}
	c := e.client(t)
	requests := checkResizes(t, &e.resizes, &e.session, func(sizes <-chan TerminalSize, stdout io.Writer) error {
		return c.Attach(context.Background(), "abc", AttachOptions{Tty: true, Stdout: stdout, Resize: sizes})
	})
	// The first size was refused twice (the process not running yet), then applied.
	assert.Equal(t, requests, 4)
}

func TestAttachErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  *attachEngine
		kind    func(error) bool
		message string
	}{
		{
			name:    "missing container",
			engine:  &attachEngine{states: []string{"gone"}},
			kind:    cerrdefs.IsNotFound,
			message: "No such container: abc",
		},
		{
			name:    "stopped container",
			engine:  &attachEngine{states: []string{"exited"}},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "container is not running (exited)",
		},
		{
			name:    "paused container",
			engine:  &attachEngine{states: []string{"paused"}},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "container is paused",
		},
		{
			name:    "stopped before the attach: the engine answers 409",
			engine:  &attachEngine{states: []string{"running", "exited"}, refuse: http.StatusConflict},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "409",
		},
		{
			name:    "removed before the attach",
			engine:  &attachEngine{states: []string{"running", "gone"}, refuse: http.StatusNotFound},
			kind:    cerrdefs.IsNotFound,
			message: "404",
		},
		{
			name:    "attach refused for another reason",
			engine:  &attachEngine{refuse: http.StatusInternalServerError},
			kind:    cerrdefs.IsUnknown,
			message: "500",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.engine.client(t)
			err := c.Attach(context.Background(), "abc", AttachOptions{Stdout: io.Discard})
			assertKindError(t, err, tc.kind, "attach to container abc: ", tc.message)
		})
	}
}

func TestAttachContextEnds(t *testing.T) {
	e := &attachEngine{tty: true, session: func(stdin io.Reader, stdout, _ io.Writer) {
		_, _ = io.WriteString(stdout, "started\r\n")
		_, _ = io.Copy(io.Discard, stdin) // until the client closes the connection
	}}
	c := e.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sizes := make(chan TerminalSize) // never closed
	// stdin never ends: its copy stays blocked in Read after Attach returned.
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout syncBuffer
	err := c.Attach(ctx, "abc", AttachOptions{Tty: true, Stdin: stdinR, Stdout: &stdout, Resize: sizes})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Assert(t, strings.HasPrefix(err.Error(), "attach to container abc: "), err.Error())
	assert.Equal(t, stdout.String(), "started\r\n")
	select {
	case <-e.done: // Attach closed the hijacked connection
	case <-time.After(10 * time.Second):
		t.Fatal("the hijacked connection stayed open")
	}
	assertNotRead(t, sizes)
}

func TestApplyResizes(t *testing.T) {
	conflict := fmt.Errorf("not running yet: %w", cerrdefs.ErrConflict)
	for _, tc := range []struct {
		name      string
		fail      []error // the answers to the first calls
		wantCalls int
	}{
		{name: "applied", wantCalls: 1},
		{name: "conflicts are tried again", fail: []error{conflict, conflict}, wantCalls: 3},
		{name: "other errors are dropped", fail: []error{errors.New("no tty")}, wantCalls: 1},
		{name: "conflicts are tried a few times only", fail: slices.Repeat([]error{conflict}, resizeAttempts+5), wantCalls: resizeAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []container.ResizeOptions
			sizes := make(chan TerminalSize)
			stop := applyResizes(context.Background(), sizes, func(_ context.Context, size container.ResizeOptions) error {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, size)
				if n := len(calls); n <= len(tc.fail) {
					return tc.fail[n-1]
				}
				return nil
			})
			sizes <- TerminalSize{Width: 80, Height: 24}
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				mu.Lock()
				n := len(calls)
				mu.Unlock()
				if n >= tc.wantCalls {
					break
				}
			}
			time.Sleep(3 * resizeRetryInterval) // room for a retry too many
			stop()
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, len(calls), tc.wantCalls)
			for _, c := range calls {
				assert.Equal(t, c, container.ResizeOptions{Width: 80, Height: 24})
			}
		})
	}
}

func TestApplyResizesStopsWhileSizesOpen(t *testing.T) {
	sizes := make(chan TerminalSize)
	stop := applyResizes(context.Background(), sizes, func(context.Context, container.ResizeOptions) error { return nil })
	sizes <- TerminalSize{Width: 1, Height: 1}
	stop()
	assertNotRead(t, sizes)
}
