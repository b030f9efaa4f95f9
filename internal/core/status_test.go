package core

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func conditions(resp *runtimeapi.StatusResponse) map[string]bool {
	out := map[string]bool{}
	for _, c := range resp.Status.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

func TestStatus(t *testing.T) {
	svc, fake := newTestService(t, nil)
	nw := newRTFakeNetwork()
	nw.StatusError(errors.New("cni config uninitialized"))
	svc.deps.Network = nw
	svc.deps.StatusInfo = map[string]func() any{"imageCache": func() any { return map[string]string{"state": "live"} }}
	ctx := context.Background()

	resp, err := svc.Status(ctx, &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	assert.DeepEqual(t, conditions(resp), map[string]bool{runtimeapi.RuntimeReady: true, runtimeapi.NetworkReady: false})

	nw.StatusError(nil)
	resp, err = svc.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	assert.DeepEqual(t, conditions(resp), map[string]bool{runtimeapi.RuntimeReady: true, runtimeapi.NetworkReady: true})
	var pinningInfo map[string]any
	assert.NilError(t, json.Unmarshal([]byte(resp.Info["pinning"]), &pinningInfo))
	assert.Check(t, len(pinningInfo) > 0)
	assert.Equal(t, resp.Info["config"], `{"k":"v"}`)
	assert.Equal(t, resp.Info["imageCache"], `{"state":"live"}`)

	fake.SetDown(true)
	resp, err = svc.Status(ctx, &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	assert.Check(t, !conditions(resp)[runtimeapi.RuntimeReady])
}

// TestStatusFeatures: what kubelet checks before it sends a pod is what the engine can do.
func TestStatusFeatures(t *testing.T) {
	for _, on := range []bool{false, true} {
		env := newRTEnv(t, rtWithConfig(func(c *Config) {
			c.RecursiveReadOnlyMounts, c.ImageVolumes, c.ImageVolumeSubpaths = on, on, on
		}))
		resp, err := env.svc.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
		assert.NilError(t, err)
		assert.Assert(t, len(resp.RuntimeHandlers) == 3, "the default handler and the engine's two runtimes")
		for _, h := range resp.RuntimeHandlers {
			assert.Equal(t, h.Features.RecursiveReadOnlyMounts, on, h.Name)
			assert.Check(t, !h.Features.UserNamespaces, h.Name)
		}
		f := resp.GetFeatures()
		assert.Assert(t, f != nil)
		assert.Check(t, !f.SupplementalGroupsPolicy && !f.UserNamespacesHostNetwork && !f.MountOptions)
		var info map[string]bool
		assert.NilError(t, json.Unmarshal([]byte(resp.Info["features"]), &info))
		assert.DeepEqual(t, info, map[string]bool{
			"recursiveReadOnlyMounts": on, "userNamespaces": false, "imageVolumes": on, "imageVolumeSubpaths": on, "cdiDevices": true,
		})
	}
}

func TestStatusDefaultBridgeIsNetworkReady(t *testing.T) {
	svc, _ := newTestService(t, nil)
	resp, err := svc.Status(context.Background(), &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	assert.Check(t, conditions(resp)[runtimeapi.NetworkReady])
}

func TestVersion(t *testing.T) {
	svc, fake := newTestService(t, nil)
	resp, err := svc.Version(context.Background(), &runtimeapi.VersionRequest{})
	assert.NilError(t, err)
	assert.Equal(t, resp.RuntimeName, "docker")
	assert.Equal(t, resp.RuntimeVersion, "29.8.1")
	assert.Equal(t, resp.RuntimeApiVersion, "v1")
	fake.SetDown(true)
	_, err = svc.Version(context.Background(), &runtimeapi.VersionRequest{})
	assert.Check(t, cerrdefs.IsUnavailable(err))
}

func TestImageFsInfo(t *testing.T) {
	svc, fake := newTestService(t, nil)
	fake.AddImage(testImage(1, "a:1"))
	resp, err := svc.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	assert.NilError(t, err)
	assert.Equal(t, len(resp.ImageFilesystems), 1)
	assert.Equal(t, resp.ImageFilesystems[0].UsedBytes.Value, uint64(1001))
	assert.Equal(t, resp.ImageFilesystems[0].FsId.Mountpoint, "/var/lib/docker")
	assert.Check(t, resp.ImageFilesystems[0].InodesUsed == nil, "inodes not counted: not reported")
	assert.Equal(t, len(resp.ContainerFilesystems), 1)
	assert.Equal(t, resp.ContainerFilesystems[0].UsedBytes.Value, uint64(0))
	assert.Equal(t, resp.ContainerFilesystems[0].FsId.Mountpoint, "/var/lib/docker")

	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	a := env.createContainer(t, sbID, sbCfg, rtContainerConfig("a"))
	b := env.createContainer(t, sbID, sbCfg, rtContainerConfig("b"))
	env.engine.SetWritableSize(a, 4096)
	env.engine.SetWritableSize(b, 1000)
	env.engine.SetFsInodesUsed(77)
	resp, err = env.svc.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	assert.NilError(t, err)
	assert.Equal(t, resp.ContainerFilesystems[0].UsedBytes.Value, uint64(5096))
	assert.Equal(t, resp.ContainerFilesystems[0].InodesUsed.GetValue(), uint64(77))
	assert.Equal(t, resp.ImageFilesystems[0].InodesUsed.GetValue(), uint64(77))
}

// TestEngineInfoIsReused: creating containers does not ask the engine for its /info
// each time (it is computed from scratch, tens of milliseconds); a failed /info is
// not remembered.
func TestEngineInfoIsReused(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	before := env.engine.Calls("Info")
	for _, name := range []string{"a", "b", "c"} {
		env.createContainer(t, sbID, sbCfg, rtContainerConfig(name))
	}
	assert.Check(t, env.engine.Calls("Info")-before <= 1, "Info called %d times for 3 containers", env.engine.Calls("Info")-before)

	fresh := newRTEnv(t)
	fresh.engine.InjectError("Info", cerrdefs.ErrUnavailable)
	_, err := fresh.svc.engineInfo(context.Background())
	assert.Check(t, cerrdefs.IsUnavailable(err))
	fresh.engine.InjectError("Info", nil)
	_, err = fresh.svc.engineInfo(context.Background())
	assert.NilError(t, err, "an error is not remembered")
}
