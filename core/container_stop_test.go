package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
)

func stopContainer(env *rtEnv, cid string, timeout int64) error {
	_, err := env.svc.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: cid, Timeout: timeout})
	return err
}

func TestStopContainer(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	created := env.createContainer(t, sbID, sbCfg, rtContainerConfig("init"))

	for _, tc := range []struct {
		name    string
		id      string
		timeout int64
		state   string
	}{
		{name: "running", id: cid, timeout: 30, state: docker.StateExited},
		{name: "stopped", id: cid, timeout: 30, state: docker.StateExited},
		{name: "negative timeout", id: cid, timeout: -1, state: docker.StateExited},
		{name: "created", id: created, state: docker.StateCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.NilError(t, stopContainer(env, tc.id, tc.timeout))
			assert.Equal(t, env.inspect(t, tc.id).State, tc.state)
		})
	}
	// The sandbox is not a container: nothing stops.
	assert.NilError(t, stopContainer(env, sbID, 0))
	assert.Equal(t, env.inspect(t, sbID).State, docker.StateRunning)
}

func TestStopContainerUnknown(t *testing.T) {
	env := newRTEnv(t)
	assert.NilError(t, stopContainer(env, "0123456789abcdef", 10))
	assert.Check(t, cerrdefs.IsInvalidArgument(stopContainer(env, "", 10)))
}

func TestStopContainerEngineError(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	for _, method := range []string{"InspectContainer", "StopContainer"} {
		env.engine.InjectError(method, cerrdefs.ErrUnavailable)
		err := stopContainer(env, cid, 1)
		assert.Check(t, cerrdefs.IsUnavailable(err), "%s: got %v", method, err)
		env.engine.InjectError(method, nil)
	}
	assert.Equal(t, env.inspect(t, cid).State, docker.StateRunning)
}
