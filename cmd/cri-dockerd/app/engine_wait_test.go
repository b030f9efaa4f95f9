package app

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/logctx"
)

// flakyEngine fails its first calls with the errors in fails, then answers.
type flakyEngine struct {
	mu    sync.Mutex
	fails []error
	calls int
}

func (e *flakyEngine) next() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if len(e.fails) == 0 {
		return nil
	}
	err := e.fails[0]
	e.fails = e.fails[1:]
	return err
}

func (e *flakyEngine) CheckVersion(context.Context) (docker.Version, error) {
	return docker.Version{Version: "29.8.1"}, e.next()
}

func (e *flakyEngine) Info(context.Context) (docker.Info, error) {
	return docker.Info{ContainerdStore: true}, e.next()
}

var quickWait = engineWait{attempt: time.Second, first: time.Millisecond, max: 4 * time.Millisecond}

func TestWaitForEngine(t *testing.T) {
	down := errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")
	e := &flakyEngine{fails: []error{down, down, nil, errors.New("info: engine starting")}}
	v, info, err := waitForEngine(e, "unix:///var/run/docker.sock", quickWait, nil, logctx.Discard())
	assert.NilError(t, err)
	assert.Equal(t, v.Version, "29.8.1")
	assert.Check(t, info.ContainerdStore, "/info read before anything is decided")
	assert.Equal(t, e.calls, 6)

	old := &flakyEngine{fails: []error{cerrdefs.ErrFailedPrecondition}}
	_, _, err = waitForEngine(old, "unix:///old.sock", quickWait, nil, logctx.Discard())
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "a too old engine is refused at once: %v", err)
	assert.Equal(t, old.calls, 1)

	stop := make(chan os.Signal, 1)
	stop <- syscall.SIGTERM
	never := &flakyEngine{fails: []error{down, down, down}}
	_, _, err = waitForEngine(never, "unix:///gone.sock", engineWait{attempt: time.Second, first: time.Hour, max: time.Hour}, stop, logctx.Discard())
	assert.Check(t, errors.Is(err, errStoppedWaiting))
	assert.Check(t, is.ErrorContains(err, "unix:///gone.sock"))
}
