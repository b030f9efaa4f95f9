package core

import (
	"context"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestRuntimeConfig(t *testing.T) {
	for _, tc := range []struct {
		driver string
		want   runtimeapi.CgroupDriver
	}{
		{driver: "systemd", want: runtimeapi.CgroupDriver_SYSTEMD},
		{driver: "cgroupfs", want: runtimeapi.CgroupDriver_CGROUPFS},
		{driver: "", want: runtimeapi.CgroupDriver_CGROUPFS},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			env := newRTEnv(t, rtWithCgroupDriver(tc.driver))
			if tc.driver == "" {
				env.engine.SetInfo(docker.Info{Driver: "overlay2", DockerRootDir: env.dockerRoot})
			}
			resp, err := env.svc.RuntimeConfig(context.Background(), &runtimeapi.RuntimeConfigRequest{})
			assert.NilError(t, err)
			assert.Equal(t, resp.GetLinux().GetCgroupDriver(), tc.want)
		})
	}
	env := newRTEnv(t)
	env.engine.SetDown(true)
	_, err := env.svc.RuntimeConfig(context.Background(), &runtimeapi.RuntimeConfigRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
}

func TestUpdateRuntimeConfig(t *testing.T) {
	env := newRTEnv(t)
	ctx := context.Background()
	update := func(cidr string) error {
		_, err := env.svc.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
			RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}},
		})
		return err
	}
	assert.NilError(t, update("10.244.1.0/24"))
	assert.Equal(t, env.net.PodCIDR(), "10.244.1.0/24")
	assert.NilError(t, update("10.244.1.0/24,fd00:1::/64"))
	assert.Equal(t, env.net.PodCIDR(), "10.244.1.0/24,fd00:1::/64")
	assert.NilError(t, update(""))
	assert.Equal(t, env.net.PodCIDR(), "10.244.1.0/24,fd00:1::/64", "an empty CIDR is ignored")
	_, err := env.svc.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{})
	assert.NilError(t, err)
	assert.Equal(t, env.net.PodCIDR(), "10.244.1.0/24,fd00:1::/64")

	noNet := newRTEnv(t, rtWithoutNetwork())
	_, err = noNet.svc.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.0.0.0/24"}},
	})
	assert.NilError(t, err)
}

func TestUpdateRuntimeConfigError(t *testing.T) {
	env := newRTEnv(t)
	bad := errors.New("bad cidr")
	env.svc.deps.Network = &cidrRejectingNetwork{rtFakeNetwork: env.net, err: bad}
	_, err := env.svc.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "nope"}},
	})
	assert.Check(t, errors.Is(err, bad), "got %v", err)
}

// cidrRejectingNetwork refuses every pod CIDR.
type cidrRejectingNetwork struct {
	*rtFakeNetwork
	err error
}

func (n *cidrRejectingNetwork) SetPodCIDR(string) error { return n.err }

// Status lists the default handler and each runtime of the engine, which RunPodSandbox
// accepts as RuntimeClass handlers.
func TestStatusRuntimeHandlers(t *testing.T) {
	env := newRTEnv(t)
	resp, err := env.svc.Status(context.Background(), &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	var names []string
	for _, h := range resp.RuntimeHandlers {
		names = append(names, h.Name)
	}
	assert.DeepEqual(t, names, []string{"", "io.containerd.runc.v2", "runc"})

	_, err = env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: rtSandboxConfig("web"), RuntimeHandler: "kata"})
	assert.Check(t, cerrdefs.IsInvalidArgument(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, `runtime handler "kata" is not a runtime of the engine (it has io.containerd.runc.v2, runc)`))
}
