//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// TestStreamingWithCrictl drives exec and port-forward as an operator does, through
// crictl and the streaming server's URLs (kubelet proxies kubectl's the same way).
func TestStreamingWithCrictl(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, append(pn.flags(filepath.Join(t.TempDir(), "root")), "--streaming-bind-addr", "127.0.0.1:0")...)
	pod := podConfig("stream")
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	id := startContainer(t, s, podID, pod, httpdContainer("httpd", "8080", ""))
	waitHTTP(t, "http://"+net.JoinHostPort(podStatus(t, s, podID).GetNetwork().GetIp(), "8080")+"/")

	// exec: output and exit status come back through the stream.
	out := s.crictl(t, "exec", id, "/citool", "pgrep", "^citool$")
	assert.Assert(t, strings.TrimSpace(out) != "", "pgrep printed no pid")
	cmd := exec.Command(env.crictl, "--runtime-endpoint", s.endpoint, "exec", id, "/citool", "pgrep", "no-such-process")
	b, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	assert.Assert(t, errors.As(err, &exitErr), "a failing command must fail crictl exec: %v %s", err, b)

	// A client that goes away ends its exec: the command writes nothing and runs on,
	// so only the streaming server's watch of the connection can end it (and free
	// the engine connection an abandoned probe would hold).
	citools := func() int {
		r, err := s.rt.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/citool", "pgrep", "^citool$"}, Timeout: 10})
		assert.NilError(t, err)
		return len(strings.Fields(string(r.GetStdout())))
	}
	waitCitools := func(want int, what string) {
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if n := citools(); n != want {
				return poll.Continue("%d citool processes, want %d (%s)", n, want, what)
			}
			return poll.Success()
		}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
	}
	before := citools()
	// crictl, with its own protocol choice, killed.
	var crictlOut strings.Builder
	abandoned := exec.Command(env.crictl, "--runtime-endpoint", s.endpoint, "exec", id, "/citool", "pause")
	abandoned.Stdout, abandoned.Stderr = &crictlOut, &crictlOut
	assert.NilError(t, abandoned.Start())
	waitCitools(before+1, "the exec's command starts")
	assert.NilError(t, abandoned.Process.Kill())
	_ = abandoned.Wait()
	waitCitools(before, "the abandoned exec's command ends; crictl said: "+crictlOut.String())
	// A SPDY client (kubelet's and kubectl's older protocol) that closes its connection.
	resp, err := s.rt.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"/citool", "pause"}, Stdout: true})
	assert.NilError(t, err)
	conn := dialExecSPDY(t, resp.GetUrl())
	waitCitools(before+1, "the SPDY exec's command starts")
	assert.NilError(t, conn.Close())
	waitCitools(before, "the SPDY exec's command ends with its connection")

	// port-forward: a local port reaches the pod's port 8080 inside its namespace
	// (the pod has no host port: only the forward can reach it from loopback).
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	local := lis.Addr().(*net.TCPAddr).Port
	assert.NilError(t, lis.Close())
	ctx, cancel := context.WithCancel(context.Background())
	pf := exec.CommandContext(ctx, env.crictl, "--runtime-endpoint", s.endpoint, "port-forward", podID, fmt.Sprintf("%d:8080", local))
	assert.NilError(t, pf.Start())
	t.Cleanup(func() { cancel(); _ = pf.Wait() })
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", local))

	_, err = s.rt.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: podID, Port: []int32{8080}})
	assert.NilError(t, err)
}

// dialExecSPDY opens an exec stream URL over SPDY (v4 protocol) with the error and
// stdout streams, as kubelet's client does; closing the connection abandons it.
// (Go's proxy settings never apply to the loopback URL.)
func dialExecSPDY(t *testing.T, streamURL string) httpstream.Connection {
	t.Helper()
	rt, err := spdy.NewRoundTripper(nil)
	assert.NilError(t, err)
	req, err := http.NewRequest(http.MethodPost, streamURL, http.NoBody)
	assert.NilError(t, err)
	req.Header.Set(httpstream.HeaderProtocolVersion, "v4.channel.k8s.io")
	resp, err := rt.RoundTrip(req)
	assert.NilError(t, err)
	conn, err := rt.NewConnection(resp)
	assert.NilError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	for _, typ := range []string{"error", "stdout"} {
		_, err := conn.CreateStream(http.Header{"Streamtype": []string{typ}})
		assert.NilError(t, err)
	}
	return conn
}
