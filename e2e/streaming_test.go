//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
