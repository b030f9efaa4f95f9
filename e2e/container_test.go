//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// httpdContainer is citool's web server on port, logging to logPath under the pod's log directory.
func httpdContainer(name, port, logPath string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: pauseRef},
		Command:  []string{"/citool", "httpd"},
		Envs:     []*runtimeapi.KeyValue{{Key: "PORT", Value: []byte(port)}},
		LogPath:  logPath,
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
}

func startContainer(t *testing.T, s *shim, podID string, pod *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	ctx := context.Background()
	created, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg, SandboxConfig: pod})
	assert.NilError(t, err)
	_, err = s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.GetContainerId()})
	assert.NilError(t, err)
	return created.GetContainerId()
}

// waitHTTP polls url until it answers 200 (the server starts asynchronously).
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := client.Get(url)
		if err != nil {
			return poll.Continue("%s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "httpd (citool substitute)") {
			return poll.Continue("%s: %d %q", url, resp.StatusCode, body)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

// criLogLine is kubelet's CRI log format: time, stream, P or F tag, content.
var criLogLine = regexp.MustCompile(`^(\S+) (stdout|stderr) (P|F) (.*)$`)

// TestContainerInCNIPod runs a web server in a CNI pod and checks what kubelet relies
// on: the pod IP and host port reach it, its log is a CRI-format file, ExecSync works
// and kills a command that outlives its timeout, and stop/remove are idempotent.
func TestContainerInCNIPod(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	ctx := context.Background()

	pod := podConfig("web")
	pod.LogDirectory = t.TempDir()
	pod.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: 18082}}
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	id := startContainer(t, s, podID, pod, httpdContainer("httpd", "8080", "httpd.log"))

	ip := podStatus(t, s, podID).GetNetwork().GetIp()
	waitHTTP(t, "http://"+net.JoinHostPort(ip, "8080")+"/")
	waitHTTP(t, "http://127.0.0.1:18082/") // the portmap plugin's host port

	// The container joined the sandbox's namespaces, as upstream makes it.
	modes := docker(t, "inspect", "--format", "{{.HostConfig.NetworkMode}} {{.HostConfig.IpcMode}} {{index .Config.Labels \"io.kubernetes.sandbox.id\"}}", id)
	assert.Equal(t, modes, fmt.Sprintf("container:%s container:%s %s", podID, podID, podID))

	// The CRI log file, in kubelet's format.
	logFile := filepath.Join(pod.LogDirectory, "httpd.log")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		b, err := os.ReadFile(logFile)
		if err != nil || !strings.Contains(string(b), "listening on :8080") {
			return poll.Continue("log %s: %q %v", logFile, b, err)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(50*time.Millisecond))
	b, err := os.ReadFile(logFile)
	assert.NilError(t, err)
	m := criLogLine.FindStringSubmatch(strings.TrimSuffix(string(b), "\n"))
	assert.Assert(t, m != nil, "not a CRI log line: %q", b)
	_, err = time.Parse(time.RFC3339Nano, m[1])
	assert.NilError(t, err)
	assert.Equal(t, m[2]+" "+m[3]+" "+m[4], "stdout F httpd (citool) listening on :8080")

	// ExecSync: output and exit code; a command that outlives its timeout is killed.
	out, err := s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/citool", "pgrep", "^citool$"}, Timeout: 10})
	assert.NilError(t, err)
	assert.Equal(t, out.GetExitCode(), int32(0), "stdout %q stderr %q", out.GetStdout(), out.GetStderr())
	out, err = s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/citool", "pgrep", "no-such-process"}, Timeout: 10})
	assert.NilError(t, err)
	assert.Equal(t, out.GetExitCode(), int32(1))
	start := time.Now()
	_, err = s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/pause"}, Timeout: 1})
	assert.Equal(t, status.Code(err), codes.DeadlineExceeded, "exec past its timeout: %v", err)
	t.Logf("ExecSync with a 1s timeout returned after %s", time.Since(start).Round(time.Millisecond))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		top := docker(t, "top", id, "-o", "pid,args")
		if strings.Contains(top, "/pause") {
			return poll.Continue("timed-out exec still running:\n%s", top)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(50*time.Millisecond))

	// Stop twice, remove twice; then status is NotFound.
	for range 2 {
		_, err = s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5})
		assert.NilError(t, err)
	}
	st, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.NilError(t, err)
	assert.Equal(t, st.GetStatus().GetState(), runtimeapi.ContainerState_CONTAINER_EXITED)
	assert.Equal(t, st.GetStatus().GetReason(), "Completed") // citool's httpd exits 0 on SIGTERM
	assert.Equal(t, st.GetStatus().GetLogPath(), logFile)
	for range 2 {
		_, err = s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
		assert.NilError(t, err)
	}
	_, err = s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.Equal(t, status.Code(err), codes.NotFound, "%v", err)
}

// TestDockerBridgePod runs a pod on Docker's own bridge (`--network-plugin ""`): the
// engine gives the IP and publishes the host port.
func TestDockerBridgePod(t *testing.T) {
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	pod := podConfig("bridge")
	pod.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: 18083}}
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	startContainer(t, s, podID, pod, httpdContainer("httpd", "8080", ""))

	_, subnet, err := net.ParseCIDR(strings.SplitN(dockerBridge, ":", 2)[1])
	assert.NilError(t, err)
	ip := net.ParseIP(podStatus(t, s, podID).GetNetwork().GetIp())
	assert.Assert(t, ip != nil && subnet.Contains(ip), "pod IP %v not on Docker's bridge %s", ip, subnet)
	assert.Equal(t, docker(t, "inspect", "--format", "{{.HostConfig.NetworkMode}}", podID), "bridge") // the engine's name for "default"
	waitHTTP(t, "http://"+net.JoinHostPort(ip.String(), "8080")+"/")
	waitHTTP(t, "http://127.0.0.1:18083/") // published by the engine
}

// TestEngineLogBounded: with --engine-log-max-size, the engine keeps at most max-file files of
// a container's output, while the CRI log file (the one kubelet reads) gets every line across the
// engine's rotations under a fast writer; without it, the engine keeps a second full copy. Logs the
// bytes on disk of each copy per MiB of CRI log. The engine drops a rotated file whoever still reads
// it, so the copy may fall behind the writer by less than max-size x max-file: 1 MiB x 2 here (the
// writer's 60,000 lines make about 5 MiB of engine log, 4 rotations). With 256 KiB files a copier
// slowed by a loaded 2-core CI machine once lost lines.
func TestEngineLogBounded(t *testing.T) {
	pauseImage(t)
	const maxSize = 1 << 20
	for _, tc := range []struct {
		name   string
		flags  []string
		bounds bool
	}{
		{name: "bounded", flags: []string{"--engine-log-max-size", "1m", "--engine-log-max-files", "2"}, bounds: true},
		{name: "engine's configuration", flags: []string{"--engine-log-max-size", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startShim(t, append([]string{"--pod-infra-container-image", pauseRef}, tc.flags...)...)
			ctx := context.Background()
			pod := podConfig("enginelog")
			pod.LogDirectory = t.TempDir()
			podID := runPod(t, s, pod)
			t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
			id := startContainer(t, s, podID, pod, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "counter"},
				Image:    &runtimeapi.ImageSpec{Image: pauseRef},
				Command:  []string{"/citool", "counter"},
				Envs:     []*runtimeapi.KeyValue{{Key: "INTERVAL", Value: []byte("10us")}},
				LogPath:  "counter.log",
				Linux:    &runtimeapi.LinuxContainerConfig{},
			})
			criLog := filepath.Join(pod.LogDirectory, "counter.log")
			waitLogLines(t, criLog, 60000)
			_, err := s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10})
			assert.NilError(t, err)

			// The copier drains the engine's log up to the container's last line.
			last := strings.TrimSpace(docker(t, "logs", "--tail", "1", id))
			poll.WaitOn(t, func(poll.LogT) poll.Result {
				b, err := os.ReadFile(criLog)
				if err != nil || !strings.HasSuffix(string(b), " "+last+"\n") {
					return poll.Continue("the CRI log does not end with %q yet (%v)", last, err)
				}
				return poll.Success()
			}, poll.WithTimeout(60*time.Second), poll.WithDelay(100*time.Millisecond))
			lines := checkCountedLog(t, criLog)

			engineLog := docker(t, "inspect", "--format", "{{.LogPath}}", id)
			files, err := filepath.Glob(engineLog + "*")
			assert.NilError(t, err)
			var engineBytes int64
			for _, f := range files {
				fi, err := os.Stat(f)
				assert.NilError(t, err)
				engineBytes += fi.Size()
			}
			fi, err := os.Stat(criLog)
			assert.NilError(t, err)
			perMiB := func(n int64) float64 { return float64(n) / float64(fi.Size()) * (1 << 20) }
			t.Logf("%d lines: CRI log %d bytes; engine log %d bytes in %d files (%.0f bytes per MiB of CRI log)",
				lines, fi.Size(), engineBytes, len(files), perMiB(engineBytes))
			if tc.bounds {
				assert.Check(t, len(files) <= 2, "engine log files: %v", files)
				assert.Check(t, engineBytes <= 2*maxSize+4096, "the engine keeps %d bytes, over 2 x 1 MiB", engineBytes)
			} else {
				assert.Check(t, engineBytes > fi.Size(), "unbounded, the engine keeps a full copy (%d bytes against %d)", engineBytes, fi.Size())
			}
		})
	}
}
