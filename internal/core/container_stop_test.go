package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
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
	// One this process created is stopped without an inspect; a restarted process
	// inspects it first.
	for _, restart := range []bool{false, true} {
		if restart {
			env.svc = New(env.svc.cfg, env.svc.deps)
		}
		for _, method := range []string{"InspectContainer", "StopContainer"} {
			env.engine.InjectError(method, cerrdefs.ErrUnavailable)
			err := stopContainer(env, cid, 1)
			if method == "InspectContainer" && !restart {
				assert.Check(t, err == nil, "%s: got %v", method, err)
				assert.NilError(t, env.engine.StartContainer(context.Background(), cid))
			} else {
				assert.Check(t, cerrdefs.IsUnavailable(err), "%s (restart %v): got %v", method, restart, err)
			}
			env.engine.InjectError(method, nil)
		}
	}
	assert.Equal(t, env.inspect(t, cid).State, docker.StateRunning)
}

// A container removed behind our back: stopping and removing the ID this process
// created succeed without an engine inspect, as for any unknown container.
func TestStopRemoveContainerGoneBehindOurBack(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	assert.NilError(t, env.engine.RemoveContainer(context.Background(), cid))
	env.engine.InjectError("InspectContainer", cerrdefs.ErrUnavailable)
	assert.NilError(t, stopContainer(env, cid, 1))
	_, err := env.svc.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
	env.engine.InjectError("InspectContainer", nil)
	assert.Check(t, !env.svc.created.has(cid), "a removed container is forgotten")
}
