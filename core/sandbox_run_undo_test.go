package core

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/network"
)

// assertNothingLeft checks that a failed RunPodSandbox left no container, no
// checkpoint and no network behind.
func assertNothingLeft(t *testing.T, env *rtEnv) {
	t.Helper()
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
	ids, err := env.checkpoints.List()
	assert.NilError(t, err)
	assert.Check(t, is.Len(ids, 0))
}

func TestRunPodSandboxSetUpFailureUndoes(t *testing.T) {
	env := newRTEnv(t)
	injected := fmt.Errorf("plugin exploded: %w", cerrdefs.ErrUnavailable)
	env.net.SetUpError(injected)
	cfg := rtSandboxConfig("web")
	cfg.PortMappings = rtPorts()
	resp, err := env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Check(t, errors.Is(err, injected), "got %v", err)
	assert.Check(t, cerrdefs.IsUnavailable(err))
	assert.Check(t, resp == nil)
	assertNothingLeft(t, env)

	setUps := env.net.SetUps()
	assert.Assert(t, is.Len(setUps, 1))
	sbID := setUps[0].SandboxID
	assert.DeepEqual(t, env.net.TearDowns(), []network.PodNetwork{{
		Namespace: "default", Name: "web", UID: "web-uid", SandboxID: sbID, PortMappings: rtNetPorts(),
	}})

	// kubelet's retry starts clean and succeeds.
	env.net.SetUpError(nil)
	sbID = env.runSandbox(t, cfg)
	assert.Check(t, env.net.Attached(sbID))
	assert.Equal(t, env.spec(t, sbID).Name, "k8s_POD_web_default_web-uid_1")
}

func TestRunPodSandboxStartFailureUndoes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		host   bool
	}{
		{name: "start", method: "StartContainer"},
		{name: "start host network", method: "StartContainer", host: true},
		{name: "inspect", method: "InspectContainer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			injected := fmt.Errorf("engine hiccup: %w", cerrdefs.ErrUnavailable)
			env.engine.InjectError(tc.method, injected)
			cfg := rtSandboxConfig("web")
			if tc.host {
				rtHostNetwork(cfg)
			}
			_, err := env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
			assert.Check(t, errors.Is(err, injected), "got %v", err)
			env.engine.InjectError(tc.method, nil)
			assertNothingLeft(t, env)
			assert.Check(t, is.Len(env.net.SetUps(), 0))
			for _, td := range env.net.TearDowns() {
				assert.Check(t, td.NetNS == "", "torn down with a namespace: %+v", td)
			}
			if tc.host {
				assert.Check(t, is.Len(env.net.TearDowns(), 0))
			} else {
				assert.Check(t, is.Len(env.net.TearDowns(), 1))
			}
		})
	}
}
