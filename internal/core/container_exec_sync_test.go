package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// runningContainer returns a started container in a fresh sandbox.
func runningContainer(t *testing.T, env *rtEnv) (sbID, cid string) {
	t.Helper()
	sbID, sbCfg := env.webSandbox(t)
	return sbID, env.runContainer(t, sbID, sbCfg, "app")
}

func TestExecSync(t *testing.T) {
	env := newRTEnv(t)
	_, cid := runningContainer(t, env)
	var mu sync.Mutex
	var gotCmds [][]string
	env.engine.SetExecHandler(func(_ string, opts docker.ExecOptions) (int, error) {
		mu.Lock()
		gotCmds = append(gotCmds, opts.Cmd)
		mu.Unlock()
		switch opts.Cmd[0] {
		case "echo":
			_, _ = io.WriteString(opts.Stdout, strings.Join(opts.Cmd[1:], " ")+"\n")
			return 0, nil
		case "fail":
			_, _ = io.WriteString(opts.Stdout, "partial")
			_, _ = io.WriteString(opts.Stderr, "oops\n")
			return 3, nil
		case "big":
			chunk := strings.Repeat("x", 1<<20)
			for range 6 {
				_, _ = opts.Stdout.Write([]byte(chunk))
			}
			return 0, nil
		}
		return 127, nil
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		cmd            []string
		stdout, stderr string
		code           int32
	}{
		{name: "ok", cmd: []string{"echo", "hello", "world"}, stdout: "hello world\n"},
		{name: "non-zero", cmd: []string{"fail"}, stdout: "partial", stderr: "oops\n", code: 3},
		{name: "not found", cmd: []string{"nope"}, code: 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: tc.cmd, Timeout: 5})
			assert.NilError(t, err)
			assert.Equal(t, string(resp.Stdout), tc.stdout)
			assert.Equal(t, string(resp.Stderr), tc.stderr)
			assert.Equal(t, resp.ExitCode, tc.code)
		})
	}
	mu.Lock()
	assert.DeepEqual(t, gotCmds[0], []string{"echo", "hello", "world"})
	mu.Unlock()

	// Output beyond the limit is dropped, not an error.
	resp, err := env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"big"}})
	assert.NilError(t, err)
	assert.Equal(t, len(resp.Stdout), maxExecSyncOutput)
}

func TestExecSyncTimeout(t *testing.T) {
	env := newRTEnv(t)
	_, cid := runningContainer(t, env)
	release := make(chan struct{})
	defer close(release)
	env.engine.SetExecHandler(func(string, docker.ExecOptions) (int, error) {
		<-release
		return 0, nil
	})
	_, err := env.svc.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"sleep", "100"}, Timeout: 1})
	assert.Check(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}

func TestExecSyncErrors(t *testing.T) {
	env := newRTEnv(t)
	sbID, cid := runningContainer(t, env)
	ctx := context.Background()

	_, err := env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "empty cmd: %v", err)
	_, err = env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{}})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "empty cmd: %v", err)

	for _, bad := range []string{"0123456789abcdef", sbID} {
		_, err = env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: bad, Cmd: []string{"true"}})
		assert.Check(t, cerrdefs.IsNotFound(err), "%s: %v", bad, err)
	}

	handlerErr := errors.New("exec create failed")
	env.engine.SetExecHandler(func(string, docker.ExecOptions) (int, error) { return -1, handlerErr })
	_, err = env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"true"}})
	assert.Check(t, errors.Is(err, handlerErr), "got %v", err)
	assert.Check(t, !errors.Is(err, context.DeadlineExceeded))

	assert.NilError(t, stopContainer(env, cid, 0))
	_, err = env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"true"}})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "not running: %v", err)

	sbCfg := rtSandboxConfig("web")
	created := env.createContainer(t, sbID, sbCfg, rtContainerConfig("created"))
	_, err = env.svc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: created, Cmd: []string{"true"}})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "created: %v", err)
}

// limitedBuffer must bound every way of writing to it: callers (stdcopy, io.Copy,
// io.WriteString) pick the fastest method the writer has.
func TestLimitedBufferBoundsEveryWritePath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w *limitedBuffer)
	}{
		{name: "Write", write: func(w *limitedBuffer) { _, _ = w.Write([]byte("0123456789")) }},
		{name: "io.WriteString", write: func(w *limitedBuffer) { _, _ = io.WriteString(w, "0123456789") }},
		{name: "io.Copy", write: func(w *limitedBuffer) { _, _ = io.Copy(w, strings.NewReader("0123456789")) }},
		{name: "fmt.Fprint", write: func(w *limitedBuffer) { _, _ = fmt.Fprint(w, "0123456789") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &limitedBuffer{max: 4}
			tc.write(b)
			tc.write(b)
			assert.Equal(t, string(b.Bytes()), "0123")
		})
	}
}
