package streaming

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// helperEnv makes the test binary a helper process instead of running tests.
const helperEnv = "DOCKPIN_STREAMING_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "netns-listener" {
		os.Exit(netnsListener())
	}
	os.Exit(m.Run())
}

// netnsListener runs in a fresh network namespace: it brings lo up, serves
// answerPod on 127.0.0.1, prints the port, and exits when its stdin ends.
func netnsListener() int {
	if err := loopbackUp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	serveAnswers(ln, "pod")
	return 0
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// serveAnswers answers each connection with "<who> got: <everything it sent>" once
// the client has half-closed, then closes it.
func serveAnswers(ln net.Listener, who string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b, err := io.ReadAll(c)
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, "%s got: %s", who, b)
		}()
	}
}

// listenAnswers serves serveAnswers on addr in the test's network namespace.
func listenAnswers(t *testing.T, addr, who string) (int, error) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, err
	}
	t.Cleanup(func() { _ = ln.Close() })
	go serveAnswers(ln, who)
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// clientStream is the library's side of a port-forward stream, backed by pipes that
// the test drives as the client: its Close ends what the client reads.
type clientStream struct {
	fromClient *io.PipeReader
	toClient   *io.PipeWriter
}

func (s clientStream) Read(p []byte) (int, error)  { return s.fromClient.Read(p) }
func (s clientStream) Write(p []byte) (int, error) { return s.toClient.Write(p) }
func (s clientStream) Close() error                { return s.toClient.Close() }

// forward runs PortForward as the library does (closing the stream when it returns)
// and plays the client: it sends send, half-closes, reads the answer until the
// stream ends, and then closes its side entirely.
func forward(t *testing.T, r *runtime, sandbox string, port int, send string) (string, error) {
	t.Helper()
	fromClientR, fromClientW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	stream := clientStream{fromClientR, toClientW}
	done := make(chan error, 1)
	go func() {
		err := r.PortForward(context.Background(), sandbox, int32(port), stream)
		_ = stream.Close()
		done <- err
	}()
	go func() {
		_, _ = io.WriteString(fromClientW, send)
		_ = fromClientW.Close()
	}()
	b, _ := io.ReadAll(toClientR)
	_ = fromClientR.CloseWithError(io.ErrClosedPipe) // the client is gone
	return string(b), <-done
}

func TestPortForwardHostNetwork(t *testing.T) {
	engine, port := hostNetEngine(t)
	r := testRuntime(t, engine)

	got, err := forward(t, r, "hostnet", port, "ping")
	assert.NilError(t, err)
	assert.Equal(t, got, "host got: ping")
}

// TestPortForwardPodClosesFirst checks the forward ends when the pod's side closes
// while the client still has its side open.
func TestPortForwardPodClosesFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "bye")
		_ = c.Close()
	}()
	engine := newEngine(t)
	addContainer(t, engine, "hostnet", docker.StateRunning, os.Getpid())
	r := testRuntime(t, engine)

	fromClientR, fromClientW := io.Pipe()
	defer fromClientW.Close()
	toClientR, toClientW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- r.PortForward(context.Background(), "hostnet", int32(ln.Addr().(*net.TCPAddr).Port), clientStream{fromClientR, toClientW})
	}()
	b, err := io.ReadAll(toClientR) // ends when PortForward closes the stream
	assert.NilError(t, err)
	assert.Equal(t, string(b), "bye")
	_ = fromClientW.Close() // the client goes away once it has seen the end
	assert.NilError(t, <-done)
}

func TestPortForwardErrors(t *testing.T) {
	closedPort := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		assert.NilError(t, err)
		p := ln.Addr().(*net.TCPAddr).Port
		assert.NilError(t, ln.Close())
		return p
	}()
	engine := newEngine(t)
	addContainer(t, engine, "hostnet", docker.StateRunning, os.Getpid())
	addContainer(t, engine, "stopped", docker.StateExited, 0)
	addContainer(t, engine, "vanished", docker.StateRunning, 1<<30) // no such process
	r := testRuntime(t, engine)

	tests := []struct {
		name     string
		sandbox  string
		port     int
		wantKind error
	}{
		{name: "missing sandbox", sandbox: "gone", port: 80, wantKind: cerrdefs.ErrNotFound},
		{name: "stopped sandbox", sandbox: "stopped", port: 80, wantKind: cerrdefs.ErrFailedPrecondition},
		{name: "namespace gone", sandbox: "vanished", port: 80, wantKind: cerrdefs.ErrFailedPrecondition},
		{name: "bad port", sandbox: "hostnet", port: 0, wantKind: cerrdefs.ErrInvalidArgument},
		{name: "nothing listens", sandbox: "hostnet", port: closedPort, wantKind: syscall.ECONNREFUSED},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := forward(t, r, tc.sandbox, tc.port, "x")
			assert.Assert(t, errors.Is(err, tc.wantKind), "got %v", err)
		})
	}
}

// TestPortForwardPodNetns forwards to a port that exists only inside another network
// namespace (a helper process's), while the same port on the host's loopback answers
// differently: the answer shows where the dial happened. Needs root.
func TestPortForwardPodNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create and enter a network namespace")
	}
	pid, port := startNetnsListener(t)
	// The same port on the host answers as "host", when it is free here.
	if _, err := listenAnswers(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "host"); err != nil {
		t.Logf("port %d is taken on the host: %v", port, err)
	}
	engine := newEngine(t)
	addContainer(t, engine, "pod", docker.StateRunning, pid)
	r := testRuntime(t, engine)
	before := threadNetns(t)

	for i := range 3 {
		got, err := forward(t, r, "pod", port, fmt.Sprint("ping ", i))
		assert.NilError(t, err)
		assert.Equal(t, got, fmt.Sprint("pod got: ping ", i))
	}
	// Every thread of the process is back in (or never left) its own namespace.
	assert.DeepEqual(t, threadNetns(t), before)
	got, err := forward(t, r, "pod", port+1, "x")
	assert.Assert(t, errors.Is(err, syscall.ECONNREFUSED), "got %q %v", got, err)
}

// startNetnsListener starts the test binary as a helper in a new network namespace
// and returns its pid and the port it listens on there; the helper ends with the test.
func startNetnsListener(t *testing.T) (int, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=netns-listener")
	// The helper also exits when its stdin ends, should this process die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	assert.NilError(t, err)
	stdout, err := cmd.StdoutPipe()
	assert.NilError(t, err)
	assert.NilError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // not a graceful exit: the race runtime would sleep a second
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	assert.NilError(t, err, "helper did not start")
	port, err := strconv.Atoi(strings.TrimSpace(line))
	assert.NilError(t, err)
	own, err := os.Readlink("/proc/self/ns/net")
	assert.NilError(t, err)
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	assert.NilError(t, err)
	assert.Assert(t, own != theirs, "the helper shares our network namespace")
	return cmd.Process.Pid, port
}

// threadNetns returns the set of network namespaces the process's threads are in.
func threadNetns(t *testing.T) map[string]bool {
	t.Helper()
	paths, err := filepath.Glob("/proc/self/task/*/ns/net")
	assert.NilError(t, err)
	set := map[string]bool{}
	for _, p := range paths {
		ns, err := os.Readlink(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread has just exited
		}
		assert.NilError(t, err)
		set[ns] = true
	}
	assert.Check(t, is.Len(set, 1))
	return set
}

// Once the client stopped sending, a pod that stays silent ends the forward instead
// of holding it (and a goroutine and a socket) forever; data extends the wait.
func TestIdleConnExpires(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &idleConn{Conn: a}
	go func() { _, _ = b.Write([]byte("x")) }()
	buf := make([]byte, 1)
	_, err := c.Read(buf) // no deadline yet
	assert.NilError(t, err)
	c.expire(20 * time.Millisecond)
	go func() { _, _ = b.Write([]byte("y")) }()
	_, err = c.Read(buf)
	assert.NilError(t, err)
	_, err = c.Read(buf)
	assert.Assert(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
}
