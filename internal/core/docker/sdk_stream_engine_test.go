package docker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"gotest.tools/v3/assert"
)

// execEngine is a fake engine that runs one exec "e1" in container "abc": the
// attach hijacks the connection like the engine (HTTP 101, Upgrade: tcp), reads
// stdin to its end when asked to, and then sends what output writes (or, with
// session, runs it with stdin as it comes); with endOutput it then ends the output
// stream and keeps the connection until the client closes it; inspect reports
// running for running polls, then exitCode, with pid; resize records the sizes
// asked for.
type execEngine struct {
	tty      bool
	withIn   bool
	output   func(stdin []byte, stdout, stderr io.Writer)
	session  func(stdin io.Reader, stdout, stderr io.Writer)
	hold     bool // keep the stream open until the client closes it
	running  int
	exitCode int
	pid      int
	resizes  resizeLog
	// endOutput ends the output stream after the output (close-write: the client
	// reads EOF) and keeps the connection until the client closes it, as for a
	// process that closed its stdout and stderr and runs on.
	endOutput bool

	mu      sync.Mutex
	created container.ExecOptions
	inspect int
	done    chan struct{} // closed when the attach handler returned
}

func (e *execEngine) client(t *testing.T) *SDKClient {
	e.done = make(chan struct{})
	return routedEngine(t, map[string]http.HandlerFunc{
		"POST /containers/abc/exec": func(w http.ResponseWriter, r *http.Request) {
			e.mu.Lock()
			_ = json.NewDecoder(r.Body).Decode(&e.created)
			e.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"Id":"e1"}`))
		},
		"POST /exec/e1/start": e.attach,
		"GET /exec/e1/json": func(w http.ResponseWriter, _ *http.Request) {
			e.mu.Lock()
			e.inspect++
			running := e.inspect <= e.running
			e.mu.Unlock()
			_ = json.NewEncoder(w).Encode(container.ExecInspect{ExecID: "e1", ContainerID: "abc", Running: running, ExitCode: e.exitCode, Pid: e.pid})
		},
		"POST /exec/e1/resize": e.resizes.record,
	})
}

func (e *execEngine) attach(w http.ResponseWriter, r *http.Request) {
	defer close(e.done)
	conn, stdin, stdout, stderr, ok := hijack(w, r, e.tty)
	if !ok {
		return
	}
	defer conn.Close()
	switch {
	case e.session != nil:
		e.session(stdin, stdout, stderr)
	case e.output != nil:
		var in []byte
		if e.withIn {
			in, _ = io.ReadAll(stdin)
		}
		e.output(in, stdout, stderr)
	case e.withIn:
		_, _ = io.Copy(io.Discard, stdin)
	}
	if e.endOutput {
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	if e.hold || e.endOutput {
		_, _ = io.Copy(io.Discard, stdin) // until the client closes the connection
	}
}

// hijack answers r as the engine answers an attach: HTTP 101 (Upgrade: tcp) with
// the stream's media type, then the bare connection. stdin reads what the client
// sends (EOF at its close-write); stdout and stderr write to the connection,
// multiplexed unless tty. The caller closes conn.
func hijack(w http.ResponseWriter, r *http.Request, tty bool) (conn net.Conn, stdin io.Reader, stdout, stderr io.Writer, ok bool) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Header.Get("Upgrade") != "tcp" {
		http.Error(w, "not an upgrade", http.StatusBadRequest)
		return nil, nil, nil, nil, false
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, nil, nil, false
	}
	media := "application/vnd.docker.multiplexed-stream"
	if tty {
		media = "application/vnd.docker.raw-stream"
	}
	_, _ = rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: " + media + "\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	_ = rw.Flush()
	stdout, stderr = conn, conn
	if !tty {
		stdout, stderr = stdcopy.NewStdWriter(conn, stdcopy.Stdout), stdcopy.NewStdWriter(conn, stdcopy.Stderr)
	}
	return conn, rw, stdout, stderr, true
}

// resizeLog is an engine's resize endpoint: it records the sizes asked for (query
// h and w), after answering the first conflicts requests 409 as an engine does
// for a process that is not running yet.
type resizeLog struct {
	conflicts int

	mu       sync.Mutex
	requests int
	sizes    []TerminalSize
}

func (l *resizeLog) record(w http.ResponseWriter, r *http.Request) {
	h, errH := strconv.ParseUint(r.URL.Query().Get("h"), 10, 16)
	wd, errW := strconv.ParseUint(r.URL.Query().Get("w"), 10, 16)
	if errH != nil || errW != nil {
		http.Error(w, `{"message":"bad size"}`, http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if l.requests <= l.conflicts {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"message":"container abc is not running"}`))
		return
	}
	l.sizes = append(l.sizes, TerminalSize{Width: uint16(wd), Height: uint16(h)})
	w.WriteHeader(http.StatusOK)
}

// wait waits until n sizes were recorded (or a while has passed) and returns them
// with the number of requests.
func (l *resizeLog) wait(n int) ([]TerminalSize, int) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		sizes, requests := slices.Clone(l.sizes), l.requests
		l.mu.Unlock()
		if len(sizes) >= n || time.Now().After(deadline) {
			return sizes, requests
		}
	}
}

// sendSizes sends sizes on a new unbuffered channel, each after the previous one
// reached the engine (so none replaces another), and returns the channel.
func sendSizes(l *resizeLog, sizes ...TerminalSize) chan TerminalSize {
	ch := make(chan TerminalSize)
	go func() {
		for i, s := range sizes {
			ch <- s
			l.wait(i + 1)
		}
	}()
	return ch
}

// checkResizes runs a TTY session with run, which must pass sizes and stdout on,
// while two terminal sizes are sent on sizes: the engine's session (set in *session)
// waits until both reached l, then reports how many did. It checks that run returned
// nil, that both sizes were applied in order while the session ran and that none is
// read once run returned, and returns the number of resize requests l answered.
func checkResizes(t *testing.T, l *resizeLog, session *func(stdin io.Reader, stdout, stderr io.Writer),
	run func(sizes <-chan TerminalSize, stdout io.Writer) error,
) (requests int) {
	t.Helper()
	*session = func(_ io.Reader, stdout, _ io.Writer) {
		got, _ := l.wait(2)
		_, _ = fmt.Fprintf(stdout, "%d sizes\r\n", len(got))
	}
	sizes := sendSizes(l, TerminalSize{Width: 80, Height: 24}, TerminalSize{Width: 120, Height: 40})
	var stdout bytes.Buffer
	assert.NilError(t, run(sizes, &stdout))
	assert.Equal(t, stdout.String(), "2 sizes\r\n")
	got, requests := l.wait(2)
	assert.DeepEqual(t, got, []TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}})
	assertNotRead(t, sizes)
	return requests
}

// assertNotRead checks that nobody reads sizes any more.
func assertNotRead(t *testing.T, sizes chan<- TerminalSize) {
	t.Helper()
	select {
	case sizes <- TerminalSize{Width: 1, Height: 1}:
		t.Fatal("a size was read after the call returned")
	case <-time.After(50 * time.Millisecond):
	}
}

// shell is an engine session that answers each line of stdin as it comes, until
// "exit" or the end of stdin.
func shell(stdin io.Reader, stdout, _ io.Writer) {
	lines := bufio.NewScanner(stdin)
	for lines.Scan() {
		if lines.Text() == "exit" {
			return
		}
		_, _ = io.WriteString(stdout, "> "+lines.Text()+"\r\n")
	}
}

// converse drives shell through run: a command's answer must come while stdin is
// still open, and "exit" must end run with nil.
func converse(t *testing.T, run func(stdin io.Reader, stdout io.Writer) error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() {
		err := run(inR, outW)
		_ = outW.Close()
		done <- err
	}()
	out := bufio.NewReader(outR)
	for _, cmd := range []string{"ls", "pwd"} {
		_, err := io.WriteString(inW, cmd+"\n")
		assert.NilError(t, err)
		line, err := out.ReadString('\n')
		assert.NilError(t, err)
		assert.Equal(t, line, "> "+cmd+"\r\n")
	}
	_, err := io.WriteString(inW, "exit\n")
	assert.NilError(t, err)
	_, _ = io.Copy(io.Discard, out)
	assert.NilError(t, <-done)
}

// attachEngine is a fake engine with one container "abc" (with a TTY when tty):
// inspect reports the states in turn, the last one from then on ("gone" answers
// 404); attach answers refuse, if set, or hijacks the connection like the engine
// and runs session with the client's stdin and the container's output streams;
// resize records the sizes asked for.
type attachEngine struct {
	states  []string
	tty     bool
	refuse  int
	session func(stdin io.Reader, stdout, stderr io.Writer)
	resizes resizeLog

	mu       sync.Mutex
	inspects int
	query    url.Values
	done     chan struct{} // closed when the attach handler returned
}

func (e *attachEngine) client(t *testing.T) *SDKClient {
	e.done = make(chan struct{})
	return routedEngine(t, map[string]http.HandlerFunc{
		"GET /containers/abc/json": func(w http.ResponseWriter, _ *http.Request) {
			e.mu.Lock()
			state := "running"
			if len(e.states) > 0 {
				state = e.states[min(e.inspects, len(e.states)-1)]
			}
			e.inspects++
			e.mu.Unlock()
			if state == "gone" {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"message":"No such container: abc"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"Id": "abc",
				"State": map[string]any{
					"Status":     state,
					"Running":    state == "running" || state == "paused" || state == "restarting",
					"Paused":     state == "paused",
					"Restarting": state == "restarting",
				},
				"Config": map[string]any{"Tty": e.tty},
			})
		},
		"POST /containers/abc/attach": func(w http.ResponseWriter, r *http.Request) {
			defer close(e.done)
			e.mu.Lock()
			e.query = r.URL.Query()
			e.mu.Unlock()
			if e.refuse != 0 {
				w.WriteHeader(e.refuse)
				_, _ = w.Write([]byte(`{"message":"engine says no"}`))
				return
			}
			conn, stdin, stdout, stderr, ok := hijack(w, r, e.tty)
			if !ok {
				return
			}
			defer conn.Close()
			if e.session != nil {
				e.session(stdin, stdout, stderr)
			}
		},
		"POST /containers/abc/resize": e.resizes.record,
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
