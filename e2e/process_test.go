//go:build e2e

package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSocketActivationAndNotify starts the binary as systemd would: the listening
// socket passed as fd 3 (LISTEN_FDS/LISTEN_PID) with --container-runtime-endpoint
// fd://, and NOTIFY_SOCKET set; it must serve on that socket and send READY=1.
func TestSocketActivationAndNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdact")
	assert.NilError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "cri.sock")
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	assert.NilError(t, err)
	defer lis.Close()
	lisFile, err := lis.File()
	assert.NilError(t, err)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify.sock"), Net: "unixgram"})
	assert.NilError(t, err)
	defer notify.Close()

	// sh sets LISTEN_PID to its own pid and execs the binary, which keeps that pid (as systemd does).
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, env.binary,
		"--container-runtime-endpoint", "fd://", "--docker-endpoint", env.dockerHost,
		"--cri-dockerd-root-directory", filepath.Join(dir, "root"), "--network-plugin", "")
	cmd.ExtraFiles = []*os.File{lisFile}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+filepath.Join(dir, "notify.sock"))
	logPath := filepath.Join(dir, "log")
	logf, err := os.Create(logPath)
	assert.NilError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	assert.NilError(t, cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	_ = lisFile.Close()

	buf := make([]byte, 256)
	assert.NilError(t, notify.SetReadDeadline(time.Now().Add(30*time.Second)))
	n, _, err := notify.ReadFromUnix(buf)
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("no sd_notify message: %v\n%s", err, b)
	}
	assert.Check(t, strings.Contains(string(buf[:n]), "READY=1"), string(buf[:n]))

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(t, err)
	defer conn.Close()
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(context.Background(), &runtimeapi.VersionRequest{})
	assert.NilError(t, err, "serving on the socket systemd passed")
	assert.Equal(t, v.RuntimeName, "docker")
}

// slowRegistry answers like a registry whose manifest requests take delay, then 404;
// the channel receives when a manifest request has arrived.
func slowRegistry(t *testing.T, delay time.Duration) (string, <-chan struct{}) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	asked := make(chan struct{}, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
	})}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis.Addr().String(), asked
}

// TestGracefulStop: SIGTERM during a request lets it finish with its own answer,
// then the process exits 0.
func TestGracefulStop(t *testing.T) {
	s := startShim(t)
	reg, asked := slowRegistry(t, 3*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := s.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: spec(reg + "/slow/image:1")})
		done <- err
	}()
	select { // the pull is in flight once the engine waits on the registry
	case <-asked:
	case err := <-done:
		t.Fatalf("the pull ended before the registry was asked: %v", err)
	}
	s.signal(t, syscall.SIGTERM)
	err := <-done
	// The pull's own outcome (the registry said manifest unknown), not a cut connection.
	assert.Assert(t, err != nil)
	assert.Check(t, strings.Contains(status.Convert(err).Message(), "manifest unknown") ||
		strings.Contains(status.Convert(err).Message(), "not found"), "in-flight request was cut: %v", err)
	assert.NilError(t, s.cmd.Wait(), "exit status after SIGTERM")
	assert.Check(t, strings.Contains(s.log(t), "waiting for in-flight requests"))
}

// TestPullProgressDeadline: a pull that makes no progress for --image-pull-progress-deadline
// is cancelled with DeadlineExceeded, naming the deadline.
func TestPullProgressDeadline(t *testing.T) {
	s := startShim(t, "--image-pull-progress-deadline", "1s")
	reg, _ := slowRegistry(t, 20*time.Second)
	// The registry stalls for 20 s: only the deadline can end the pull with this error.
	start := time.Now()
	_, err := s.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: spec(reg + "/stalled/image:1")})
	assert.Equal(t, status.Code(err), codes.DeadlineExceeded, "got %v", err)
	assert.Check(t, strings.Contains(status.Convert(err).Message(), "no pull progress"), err)
	t.Logf("stalled pull cancelled after %v", time.Since(start).Round(time.Millisecond))
}
