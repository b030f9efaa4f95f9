package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// dialSPDY upgrades a request for streamURL to a SPDY connection speaking protocol,
// as kubelet's and kubectl's clients do.
func dialSPDY(t *testing.T, streamURL, protocol string) (httpstream.Connection, error) {
	t.Helper()
	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{
		Proxier: func(*http.Request) (*url.URL, error) { return nil, nil },
	})
	assert.NilError(t, err)
	req, err := http.NewRequest(http.MethodPost, streamURL, nil)
	assert.NilError(t, err)
	req.Header.Add(httpstream.HeaderProtocolVersion, protocol)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	conn, err := rt.NewConnection(resp)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, nil
}

func createStream(t *testing.T, conn httpstream.Connection, kv ...string) httpstream.Stream {
	t.Helper()
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	s, err := conn.CreateStream(h)
	assert.NilError(t, err)
	return s
}

// streamStatus is the status a v4 server writes on the error stream.
type streamStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Details struct {
		Causes []struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"causes"`
	} `json:"details"`
}

// exitCode interprets a v4 status as kubectl does: 0 for success, the command's exit
// code for NonZeroExitCode, an error otherwise.
func (s streamStatus) exitCode() (int, error) {
	if s.Status == "Success" {
		return 0, nil
	}
	if s.Reason == remotecommand.NonZeroExitCodeReason {
		for _, c := range s.Details.Causes {
			if c.Reason == remotecommand.ExitCodeCauseType {
				var code int
				_, err := fmt.Sscan(c.Message, &code)
				return code, err
			}
		}
	}
	return -1, errors.New(s.Message)
}

// remoteCommand is one exec or attach as a v4 client runs it.
type remoteCommand struct {
	stdin  string
	sizes  []remotecommand.TerminalSize
	stdout bool
	stderr bool
	tty    bool
}

type commandResult struct {
	stdout, stderr string
	status         streamStatus
}

// run opens the streams rc asks for, sends stdin and the sizes, reads the output to
// its end and then the status, as client-go's v4 executor does.
func (rc remoteCommand) run(t *testing.T, streamURL string) commandResult {
	t.Helper()
	conn, err := dialSPDY(t, streamURL, remotecommand.StreamProtocolV4Name)
	assert.NilError(t, err)
	st := remotecommand.StreamType
	errStream := createStream(t, conn, st, remotecommand.StreamTypeError)
	var stdin, stdout, stderr, resize httpstream.Stream
	if rc.stdin != "" {
		stdin = createStream(t, conn, st, remotecommand.StreamTypeStdin)
	}
	if rc.stdout {
		stdout = createStream(t, conn, st, remotecommand.StreamTypeStdout)
	}
	if rc.stderr {
		stderr = createStream(t, conn, st, remotecommand.StreamTypeStderr)
	}
	if rc.tty {
		resize = createStream(t, conn, st, remotecommand.StreamTypeResize)
	}

	var res commandResult
	var wg sync.WaitGroup
	read := func(s httpstream.Stream, into *string) {
		if s == nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := io.ReadAll(s)
			*into = string(b)
		}()
	}
	read(stdout, &res.stdout)
	read(stderr, &res.stderr)
	if resize != nil {
		enc := json.NewEncoder(resize)
		for _, s := range rc.sizes {
			assert.NilError(t, enc.Encode(s))
		}
		assert.NilError(t, resize.Close())
	}
	if stdin != nil {
		_, err := io.WriteString(stdin, rc.stdin)
		assert.NilError(t, err)
		assert.NilError(t, stdin.Close())
	}
	wg.Wait()
	b, err := io.ReadAll(errStream)
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal(b, &res.status), "status %q", b)
	return res
}

func TestServerExec(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	s := newTestServer(t, engine)

	tests := []struct {
		name       string
		req        *runtimeapi.ExecRequest
		rc         remoteCommand
		wantOut    string
		wantErrOut string
		wantCode   int
	}{
		{
			name:    "stdout",
			req:     &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"echo", "hi"}, Stdout: true, Stderr: true},
			rc:      remoteCommand{stdout: true, stderr: true},
			wantOut: "hi\n",
		},
		{
			name:       "stderr and exit code",
			req:        &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"nope"}, Stdout: true, Stderr: true},
			rc:         remoteCommand{stdout: true, stderr: true},
			wantErrOut: "nope: not found\n",
			wantCode:   127,
		},
		{
			name:     "exit code only",
			req:      &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"exit", "42"}, Stdout: true},
			rc:       remoteCommand{stdout: true},
			wantCode: 42,
		},
		{
			name:    "stdin",
			req:     &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"cat"}, Stdin: true, Stdout: true},
			rc:      remoteCommand{stdin: "some input\n", stdout: true},
			wantOut: "some input\n",
		},
		{
			name:    "tty and resize",
			req:     &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"tty"}, Stdout: true, Tty: true},
			rc:      remoteCommand{stdout: true, tty: true, sizes: []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 132, Height: 43}}},
			wantOut: "80x24\n132x43\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.GetExec(tc.req)
			assert.NilError(t, err)
			u, err := url.Parse(resp.GetUrl())
			assert.NilError(t, err)
			assert.Check(t, is.Equal(u.Host, s.Addr()))

			res := tc.rc.run(t, resp.GetUrl())
			assert.Check(t, is.Equal(res.stdout, tc.wantOut))
			assert.Check(t, is.Equal(res.stderr, tc.wantErrOut))
			code, err := res.status.exitCode()
			assert.NilError(t, err)
			assert.Check(t, is.Equal(code, tc.wantCode))
		})
	}
	assert.DeepEqual(t, engine.Resizes("c1"), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 132, Height: 43}})

	t.Run("engine error", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "gone", Cmd: []string{"echo"}, Stdout: true})
		assert.NilError(t, err)
		res := remoteCommand{stdout: true}.run(t, resp.GetUrl())
		_, err = res.status.exitCode()
		assert.ErrorContains(t, err, "no such container: gone")
	})
	t.Run("url is single use", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"echo"}, Stdout: true})
		assert.NilError(t, err)
		remoteCommand{stdout: true}.run(t, resp.GetUrl())
		_, err = dialSPDY(t, resp.GetUrl(), remotecommand.StreamProtocolV4Name)
		assert.ErrorContains(t, err, "404")
	})
}

func TestServerAttach(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	s := newTestServer(t, engine)

	resp, err := s.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c1", Stdin: true, Stdout: true, Tty: true})
	assert.NilError(t, err)
	res := remoteCommand{stdin: "exit\n", stdout: true, tty: true, sizes: []remotecommand.TerminalSize{{Width: 90, Height: 30}}}.run(t, resp.GetUrl())
	assert.Check(t, is.Equal(res.stdout, "attached to c1\nexit\n"))
	assert.Check(t, is.Equal(res.status.Status, "Success"), "%+v", res.status)
	assert.Check(t, is.Equal(engine.AttachedStdin("c1"), "exit\n"))
	assert.Check(t, is.DeepEqual(engine.Resizes("c1"), []docker.TerminalSize{{Width: 90, Height: 30}}))
}

func TestServerPortForward(t *testing.T) {
	engine, port := hostNetEngine(t)
	s := newTestServer(t, engine)

	resp, err := s.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "hostnet", Port: []int32{int32(port)}})
	assert.NilError(t, err)
	conn, err := dialSPDY(t, resp.GetUrl(), portforward.ProtocolV1Name)
	assert.NilError(t, err)
	// Two forwarded connections over one stream connection, as kubectl makes them.
	for i := range 2 {
		id := fmt.Sprint(i)
		p := fmt.Sprint(port)
		errStream := createStream(t, conn, portforward.StreamType, portforward.StreamTypeError, portforward.PortHeader, p, portforward.PortForwardRequestIDHeader, id)
		data := createStream(t, conn, portforward.StreamType, portforward.StreamTypeData, portforward.PortHeader, p, portforward.PortForwardRequestIDHeader, id)
		_, err = io.WriteString(data, "ping "+id)
		assert.NilError(t, err)
		assert.NilError(t, data.Close()) // half-close: the answer still comes back
		b, err := io.ReadAll(data)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(string(b), "host got: ping "+id))
		b, err = io.ReadAll(errStream)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(string(b), ""))
		conn.RemoveStreams(errStream, data)
	}

	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		assert.NilError(t, err)
		closed := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		assert.NilError(t, ln.Close())
		resp, err := s.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "hostnet"})
		assert.NilError(t, err)
		conn, err := dialSPDY(t, resp.GetUrl(), portforward.ProtocolV1Name)
		assert.NilError(t, err)
		// The streaming library writes the error and then resets the pair of streams;
		// the reset can overtake the error's bytes ("Stream reset"). A client sees the
		// reason in at least one of a few attempts; the reset alone is the library's.
		var got []string
		for i := range 5 {
			id := fmt.Sprint(i)
			errStream := createStream(t, conn, portforward.StreamType, portforward.StreamTypeError, portforward.PortHeader, closed, portforward.PortForwardRequestIDHeader, id)
			h := http.Header{}
			h.Set(portforward.StreamType, portforward.StreamTypeData)
			h.Set(portforward.PortHeader, closed)
			h.Set(portforward.PortForwardRequestIDHeader, id)
			data, dataErr := conn.CreateStream(h) // the pair may be reset already
			b, err := io.ReadAll(errStream)
			if dataErr == nil {
				_, _ = io.ReadAll(data)
				conn.RemoveStreams(data)
			}
			conn.RemoveStreams(errStream)
			if strings.Contains(string(b), "connection refused") {
				return
			}
			got = append(got, fmt.Sprintf("%q (%v)", b, err))
		}
		t.Fatalf("no attempt reported the refused connection: %v", got)
	})
}

// TestServerClose checks that Close ends a running exec (its context is cancelled),
// closes its connection, stops accepting and makes Serve return.
func TestServerClose(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	s, err := New(Config{}, engine, testLogger(t))
	assert.NilError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()

	conn := startSleepingExec(t, s, engine)

	assert.NilError(t, s.Close())
	assert.NilError(t, <-served)
	assert.Equal(t, engine.Active("Exec"), 0, "Close waits for running streams")
	select {
	case <-conn.CloseChan():
	case <-time.After(10 * time.Second):
		t.Fatal("the stream connection stays open after Close")
	}
	_, err = net.Dial("tcp", s.Addr())
	assert.Assert(t, errors.Is(err, syscall.ECONNREFUSED), "got %v", err)
	assert.NilError(t, s.Close(), "Close is idempotent")

	// A runtime call after Close is refused.
	r := &runtime{engine: engine, log: testLogger(t), s: s}
	err = r.Exec(context.Background(), "c1", []string{"echo"}, nil, &sink{}, nil, false, nil)
	assert.Assert(t, errors.Is(err, cerrdefs.ErrUnavailable), "got %v", err)
}

// TestServerExecEndsWhenClientGoes checks that an exec whose command keeps running
// without output ends (its engine call's context is cancelled) once its client
// closes the connection: net/http stops watching an upgraded connection, so
// without the server's own watch each abandoned probe would leave an engine
// connection behind.
func TestServerExecEndsWhenClientGoes(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	s := newTestServer(t, engine)
	conn := startSleepingExec(t, s, engine)
	assert.Check(t, is.DeepEqual(s.OpenSessions(), map[string]int64{SessionExec: 1, SessionAttach: 0, SessionPortForward: 0}))
	assert.NilError(t, conn.Close())
	waitExecs(t, engine, 0)
	// The session counts as open until its handler returns, just after the engine call.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := s.OpenSessions()[SessionExec]; n != 0 {
			return poll.Continue("%d exec sessions open", n)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(5*time.Millisecond))
}

// startSleepingExec opens an exec of "sleep" in container c1 (blocked until the
// test ends or its context does) with the error and stdout streams, and waits
// until the engine runs it.
func startSleepingExec(t *testing.T, s *Server, engine *dockertest.Fake) httpstream.Connection {
	t.Helper()
	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"sleep"}, Stdout: true})
	assert.NilError(t, err)
	conn, err := dialSPDY(t, resp.GetUrl(), remotecommand.StreamProtocolV4Name)
	assert.NilError(t, err)
	createStream(t, conn, remotecommand.StreamType, remotecommand.StreamTypeError)
	createStream(t, conn, remotecommand.StreamType, remotecommand.StreamTypeStdout)
	waitExecs(t, engine, 1)
	return conn
}

// waitExecs waits until the engine runs want execs.
func waitExecs(t *testing.T, engine *dockertest.Fake, want int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := engine.Active("Exec"); n != want {
			return poll.Continue("%d execs running, want %d", n, want)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(5*time.Millisecond))
}

func TestCloseWithoutServe(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1"}, newEngine(t), nil)
	assert.NilError(t, err)
	assert.NilError(t, s.Close())
	assert.NilError(t, s.Serve())
	_, err = net.Dial("tcp", s.Addr())
	assert.Assert(t, errors.Is(err, syscall.ECONNREFUSED), "got %v", err)
}

func TestServerRejectsBadRequests(t *testing.T) {
	s := newTestServer(t, newEngine(t))
	_, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"sh"}, Tty: true, Stdout: true, Stderr: true})
	assert.ErrorContains(t, err, "tty and stderr")
	_, err = s.GetPortForward(&runtimeapi.PortForwardRequest{})
	assert.ErrorContains(t, err, "pod_sandbox_id")
	r, err := http.Get("http://" + s.Addr() + "/exec/no-such-token")
	assert.NilError(t, err)
	_ = r.Body.Close()
	assert.Equal(t, r.StatusCode, http.StatusNotFound)
}

// TestServerStreamsInParallel runs several execs at once (for the race detector).
func TestServerStreamsInParallel(t *testing.T) {
	engine := newEngine(t)
	addContainer(t, engine, "c1", docker.StateRunning, 1)
	s := newTestServer(t, engine)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"echo", fmt.Sprint(i)}, Stdout: true})
			assert.Check(t, err)
			if err != nil {
				return
			}
			res := remoteCommand{stdout: true}.run(t, resp.GetUrl())
			assert.Check(t, is.Equal(strings.TrimSpace(res.stdout), fmt.Sprint(i)))
		}()
	}
	wg.Wait()
}
