//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
)

// TestPinsDirWatched: the pins directory applies without a SIGHUP, as configuration
// management or `echo >>` would use it: created after the start, a file added, a line
// appended, a bad file (the previous pins stay), files removed.
func TestPinsDirWatched(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pins.d") // does not exist yet
	s := startShim(t, "--pinned-images-dir", dir)
	a := importImage(t, "e2e/pinsdir-a:1")
	b := importImage(t, "e2e/pinsdir-b:1")
	waitListPinned(t, s, a, false)

	assert.NilError(t, os.Mkdir(dir, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "10-app"), []byte("e2e/pinsdir-a:1\n"), 0o644))
	waitListPinned(t, s, a, true)

	f, err := os.OpenFile(filepath.Join(dir, "10-app"), os.O_APPEND|os.O_WRONLY, 0)
	assert.NilError(t, err)
	_, err = f.WriteString("e2e/pinsdir-b:1\n")
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
	waitListPinned(t, s, b, true)

	assert.NilError(t, os.WriteFile(filepath.Join(dir, "20-bad"), []byte("not a [valid pattern\n"), 0o644))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if strings.Contains(s.log(t), "pins files not reloaded") {
			return poll.Success()
		}
		return poll.Continue("the bad file's refusal not logged yet")
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
	got, err := s.listPinned(context.Background())
	assert.NilError(t, err)
	assert.Check(t, got[a] && got[b], "a bad file keeps the previous pins")
	assert.Check(t, strings.Contains(s.log(t), "20-bad"), "the error names the file")

	assert.NilError(t, os.Remove(filepath.Join(dir, "20-bad")))
	assert.NilError(t, os.Remove(filepath.Join(dir, "10-app")))
	waitListPinned(t, s, a, false)
	waitListPinned(t, s, b, false)
}

// runOurs runs our binary with args to its end and returns its exit code and output.
func runOurs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, env.binary, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	assert.NilError(t, err, string(out))
	return 0, string(out)
}

// TestPinsRelease: what uninstall and the move back to upstream run. On the
// containerd store, with our binary stopped, `cri-dockerd pins release` deletes the
// lease and the content of a pinned image, deleted with docker rmi, is collected; on
// the classic store it says that nothing is held.
func TestPinsRelease(t *testing.T) {
	if env.store != "containerd" {
		code, out := runOurs(t, "pins", "release", "--docker-endpoint", env.dockerHost)
		assert.Equal(t, code, 0, out)
		assert.Check(t, is.Contains(out, "classic image store: pinning holds nothing"))
		return
	}
	id := stickyImage(t, "e2e/release:1")
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/release:1")
	waitListPinned(t, s, id, true)
	waitLeased(t, s, id, true)
	s.stop(t)

	code, out := runOurs(t, "pins", "release", "--docker-endpoint", env.dockerHost, "--containerd-address", containerdSocket(),
		"--cri-dockerd-root-directory", s.root)
	assert.Equal(t, code, 0, out)
	assert.Check(t, is.Contains(out, "lease "+s.leaseOf(t)+" deleted"))
	assert.Check(t, is.Len(leased(t, s), 0))

	// Released: the engine frees the image's content when it is deleted.
	docker(t, "rmi", "e2e/release:1")
	waitContentGone(t, id)

	// Again: nothing left, still success.
	code, out = runOurs(t, "pins", "release", "--docker-endpoint", env.dockerHost, "--containerd-address", containerdSocket())
	assert.Equal(t, code, 0, out)
}

// waitContentGone waits until the engine's containerd no longer has the content digest.
func waitContentGone(t *testing.T, digest string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+containerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(t, err)
	defer conn.Close()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		ctx, cancel := ctrdCall()
		defer cancel()
		_, err := contentapi.NewContentClient(conn).Info(ctx, &contentapi.InfoRequest{Digest: digest})
		if status.Code(err) == codes.NotFound {
			return poll.Success()
		}
		return poll.Continue("content %s still there (%v)", digest, err)
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(200*time.Millisecond))
}

// TestCheckConfig: the pre-flight check against the real engine passes, and names an
// engine that does not answer.
func TestCheckConfig(t *testing.T) {
	root := t.TempDir()
	code, out := runOurs(t, "--check-config", "--docker-endpoint", env.dockerHost, "--network-plugin", "",
		"--cri-dockerd-root-directory", filepath.Join(root, "lib"), "--pinned-images-dir", filepath.Join(root, "pins.d"))
	assert.Equal(t, code, 0, out)
	assert.Check(t, is.Contains(out, "ok     engine       Docker "))
	assert.Check(t, is.Contains(out, "all checks passed"))

	code, out = runOurs(t, "--check-config", "--docker-endpoint", "unix://"+filepath.Join(root, "no.sock"), "--network-plugin", "")
	assert.Equal(t, code, 1, out)
	assert.Check(t, is.Contains(out, "error  engine"))
}
