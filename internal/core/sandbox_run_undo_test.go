package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/network"
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

// TestNameConflict: a create whose name is taken behaves as upstream cri-dockerd's, so
// kubelet sees the same outcome: a non-running holder is removed and the conflict
// returned (kubelet's retry then creates under the plain name); a live holder fails
// the create and stays; a random suffix is used only when the holder is already gone.
func TestNameConflict(t *testing.T) {
	suffixed := regexp.MustCompile(`^k8s_POD_web_default_web-uid_1_[0-9a-f]{8}$`)
	for _, tc := range []struct {
		name  string
		state string // of the container holding the name
		gone  string // a method before which the holder disappears
		// what the first RunPodSandbox does
		wantErr     bool
		wantRemoved bool   // the holder is gone afterwards
		wantName    string // "suffixed" or "plain" for the sandbox made (by the first call or the retry)
	}{
		{name: "exited holder is removed, retry succeeds", state: docker.StateExited, wantErr: true, wantRemoved: true, wantName: "plain"},
		{name: "created holder is removed, retry succeeds", state: docker.StateCreated, wantErr: true, wantRemoved: true, wantName: "plain"},
		{name: "running holder fails the create", state: docker.StateRunning, wantErr: true},
		{name: "paused holder fails the create", state: docker.StatePaused, wantErr: true},
		{name: "holder gone before inspect: random suffix", state: docker.StateExited, gone: "InspectContainer", wantRemoved: true, wantName: "suffixed"},
		{name: "holder gone before remove: random suffix", state: docker.StateExited, gone: "RemoveContainer", wantRemoved: true, wantName: "suffixed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			ctx := context.Background()
			spec := rtSandboxSpec()
			holder, err := env.engine.CreateContainer(ctx, spec)
			assert.NilError(t, err)
			env.engine.SetContainerState(holder, tc.state, 0)
			if tc.gone != "" {
				env.engine.RemoveBefore(tc.gone, holder)
			}

			req := &runtimeapi.RunPodSandboxRequest{Config: rtSandboxConfig("web")}
			resp, err := env.svc.RunPodSandbox(ctx, req)
			if tc.wantErr {
				assert.Check(t, cerrdefs.IsAlreadyExists(err), "%v", err)
			} else {
				assert.NilError(t, err)
			}
			_, ierr := env.engine.InspectContainer(ctx, holder)
			assert.Check(t, is.Equal(cerrdefs.IsNotFound(ierr), tc.wantRemoved), "holder removed: %v", ierr)
			if tc.wantName == "" {
				// Nothing else was made: the holder is the only container.
				list, err := env.engine.ListContainers(ctx, docker.ContainerFilter{})
				assert.NilError(t, err)
				assert.Check(t, is.Len(list, 1))
				return
			}
			if tc.wantErr { // kubelet retries
				resp, err = env.svc.RunPodSandbox(ctx, req)
				assert.NilError(t, err)
			}
			got, err := env.engine.InspectContainer(ctx, resp.GetPodSandboxId())
			assert.NilError(t, err)
			switch tc.wantName {
			case "plain":
				assert.Check(t, is.Equal(got.Name, spec.Name))
			case "suffixed":
				assert.Check(t, suffixed.MatchString(got.Name), got.Name)
			}
			list, err := env.engine.ListContainers(ctx, docker.ContainerFilter{})
			assert.NilError(t, err)
			assert.Check(t, is.Len(list, 1), "one sandbox container")
		})
	}
}
