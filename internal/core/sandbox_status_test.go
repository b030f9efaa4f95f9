package core

import (
	"context"
	"encoding/json"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func sandboxStatus(t *testing.T, env *rtEnv, sbID string, verbose bool) *runtimeapi.PodSandboxStatusResponse {
	t.Helper()
	resp, err := env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID, Verbose: verbose})
	assert.NilError(t, err)
	return resp
}

func TestPodSandboxStatus(t *testing.T) {
	env := newRTEnv(t)
	env.net.ipv6 = true
	cfg := rtSandboxConfig("web")
	cfg.Labels["app"] = "web"
	cfg.Annotations["note"] = "hello"
	sbID := env.runSandbox(t, cfg)
	details := env.inspect(t, sbID)

	resp := sandboxStatus(t, env, sbID, false)
	assert.Check(t, resp.Timestamp == 0, "a timestamp tells kubelet (EventedPLEG) the containers' statuses are in the response")
	assert.Check(t, resp.Info == nil)
	want := &runtimeapi.PodSandboxStatus{
		Id:        sbID,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "web-uid", Attempt: 1},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: details.Created.UnixNano(),
		Network: &runtimeapi.PodSandboxNetworkStatus{
			Ip:            "10.88.0.1",
			AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00:88::1"}},
		},
		Labels: map[string]string{
			labelPodName: "web", labelPodNamespace: "default", labelPodUID: "web-uid", "app": "web",
			labelContainerName: "POD",
		},
		Annotations: map[string]string{"kubernetes.io/config.source": "api", "note": "hello"},
	}
	got := resp.Status
	linux := got.Linux
	got.Linux = nil
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	opts := linux.GetNamespaces().GetOptions()
	assert.Equal(t, opts.GetNetwork(), runtimeapi.NamespaceMode_POD)
	assert.Equal(t, opts.GetIpc(), runtimeapi.NamespaceMode_POD)
	assert.Check(t, opts.GetPid() != runtimeapi.NamespaceMode_NODE)

	// Stopped: NOTREADY, no IPs.
	assert.NilError(t, stopSandbox(env, sbID))
	got = sandboxStatus(t, env, sbID, false).Status
	assert.Equal(t, got.State, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	assert.Check(t, got.Network != nil && got.Network.Ip == "", "%v", got.Network)
	assert.Equal(t, got.Metadata.Name, "web")
}

func TestPodSandboxStatusNamespaces(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtHostNetwork(rtSandboxConfig("web"))
	cfg.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_NODE
	cfg.Linux.SecurityContext.NamespaceOptions.Ipc = runtimeapi.NamespaceMode_NODE
	sbID := env.runSandbox(t, cfg)
	st := sandboxStatus(t, env, sbID, false).Status
	want := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}
	if diff := cmp.Diff(want, st.GetLinux().GetNamespaces().GetOptions(), protocmp.Transform()); diff != "" {
		t.Errorf("namespaces (-want +got):\n%s", diff)
	}
	assert.Check(t, st.Network == nil, "host network pods report no IP: %v", st.Network)
	assert.Equal(t, st.State, runtimeapi.PodSandboxState_SANDBOX_READY)
}

func TestPodSandboxStatusDockerBridge(t *testing.T) {
	env := newRTEnv(t, rtWithoutNetwork())
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	ip := env.inspect(t, sbID).IPAddress
	assert.Assert(t, ip != "")
	st := sandboxStatus(t, env, sbID, false).Status
	if diff := cmp.Diff(&runtimeapi.PodSandboxNetworkStatus{Ip: ip}, st.Network, protocmp.Transform()); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
}

func TestPodSandboxStatusNetworkUnknown(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	// The plugin forgot the sandbox (e.g. its cache was wiped): no error, and an empty IP,
	// which makes kubelet replace the sandbox (a nil network status would not).
	assert.NilError(t, env.net.TearDown(context.Background(), podNetwork(sbID, "", &runtimeapi.PodSandboxMetadata{}, nil)))
	st := sandboxStatus(t, env, sbID, false).Status
	assert.Check(t, st.Network != nil && st.Network.Ip == "", "%v", st.Network)
	assert.Equal(t, st.State, runtimeapi.PodSandboxState_SANDBOX_READY)
}

func TestPodSandboxStatusVerbose(t *testing.T) {
	env := newRTEnv(t)
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	resp := sandboxStatus(t, env, sbID, true)
	raw, ok := resp.Info["info"]
	assert.Assert(t, ok, "no verbose info: %v", resp.Info)
	var info map[string]any
	assert.NilError(t, json.Unmarshal([]byte(raw), &info))
	d := env.inspect(t, sbID)
	assert.Equal(t, info["pid"], float64(d.Pid))
	assert.Equal(t, info["image"], rtSandboxImage)
	assert.Equal(t, info["networkMode"], "none")
	assert.Equal(t, info["resolvConfPath"], d.ResolvConfPath)
}

func TestPodSandboxStatusNotFound(t *testing.T) {
	env := newRTEnv(t)
	sbID, cfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, cfg, rtContainerConfig("app"))
	foreign, err := env.engine.CreateContainer(context.Background(), docker.ContainerSpec{Name: "k8s_POD_x_y_z_0", Image: rtSandboxImage})
	assert.NilError(t, err)

	for _, tc := range []struct{ name, id string }{
		{"unknown", "0123456789abcdef"},
		{"container", cid},
		{"unlabelled", foreign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: tc.id})
			assert.Check(t, cerrdefs.IsNotFound(err), "got %v", err)
		})
	}
	_, err = env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)

	env.engine.InjectError("InspectContainer", cerrdefs.ErrUnavailable)
	_, err = env.svc.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}
