package core

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/core/network"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// rtSandboxImage is the sandbox image of every test service.
const rtSandboxImage = "registry.k8s.io/pause:3.10"

// rtContainerImage is an image the test engine has for containers.
const rtContainerImage = "busybox:1.36"

// rtEnv is a Service over fakes of everything it talks to.
type rtEnv struct {
	svc         *Service
	engine      *dockertest.Fake
	net         *rtFakeNetwork // nil when built without a network
	logs        *rtFakeLogs
	checkpoints *checkpoint.Store
	cpDir       string // where the checkpoint files are
	dockerRoot  string
}

type rtOption func(*rtOptions)

type rtOptions struct {
	noNetwork    bool
	cgroupDriver string
	noSandboxImg bool
	keeper       PinKeeper
	config       func(*Config)
	nri          NRI
}

// rtWithoutNetwork builds the service with Network nil (Docker's bridge).
func rtWithoutNetwork() rtOption { return func(o *rtOptions) { o.noNetwork = true } }

// rtWithCgroupDriver sets the engine's cgroup driver.
func rtWithCgroupDriver(d string) rtOption { return func(o *rtOptions) { o.cgroupDriver = d } }

// rtWithoutSandboxImage leaves the sandbox image out of the engine.
func rtWithoutSandboxImage() rtOption { return func(o *rtOptions) { o.noSandboxImg = true } }

// rtWithConfig changes the service's Config.
func rtWithConfig(f func(*Config)) rtOption { return func(o *rtOptions) { o.config = f } }

// rtWithPinKeeper puts keeper around the engine's pulls.
func rtWithPinKeeper(k PinKeeper) rtOption { return func(o *rtOptions) { o.keeper = k } }

// newRTEnv returns a Service with a fake engine whose data root is a temp dir, a
// real checkpoint store in a temp dir, a fake network and a fake log copier. The
// engine has the sandbox image and rtContainerImage.
func newRTEnv(t *testing.T, opts ...rtOption) *rtEnv {
	t.Helper()
	var o rtOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.cgroupDriver == "" {
		o.cgroupDriver = "systemd"
	}
	pins, err := pinner.New(pinner.DefaultConfig(), logctx.Discard())
	assert.NilError(t, err)
	engine := dockertest.New()
	root := t.TempDir()
	engine.SetInfo(docker.Info{
		Driver: "overlay2", DockerRootDir: root, CgroupDriver: o.cgroupDriver,
		Runtimes: []string{"io.containerd.runc.v2", "runc"}, DefaultRuntime: "runc",
	})
	if !o.noSandboxImg {
		engine.AddImage(testImage(9001, rtSandboxImage))
	}
	engine.AddImage(testImage(9002, rtContainerImage))
	cpRoot := t.TempDir()
	store, err := checkpoint.NewStore(cpRoot)
	assert.NilError(t, err)
	env := &rtEnv{
		engine: engine, logs: newRTFakeLogs(), checkpoints: store,
		cpDir: filepath.Join(cpRoot, "sandbox"), dockerRoot: root,
	}
	deps := Deps{Docker: KeepPins(engine, o.keeper), Pins: pins, Checkpoints: store, Logs: env.logs, Log: logctx.Discard()}
	if !o.noNetwork {
		env.net = newRTFakeNetwork()
		deps.Network = env.net
	}
	deps.NRI = o.nri
	cfg := Config{SandboxImage: rtSandboxImage}
	if o.config != nil {
		o.config(&cfg)
	}
	env.svc = New(cfg, deps)
	return env
}

// rtSandboxConfig returns a plain sandbox config of pod name in namespace "default".
func rtSandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid", Attempt: 1},
		Hostname: name,
		Labels: map[string]string{
			labelPodName: name, labelPodNamespace: "default", labelPodUID: name + "-uid",
		},
		Annotations:  map[string]string{"kubernetes.io/config.source": "api"},
		LogDirectory: "/var/log/pods/default_" + name + "_" + name + "-uid",
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
				Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
		},
	}
}

// rtHostNetwork makes cfg use the node's network namespace.
func rtHostNetwork(cfg *runtimeapi.PodSandboxConfig) *runtimeapi.PodSandboxConfig {
	cfg.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	return cfg
}

// runSandbox runs cfg and returns the sandbox ID.
func (e *rtEnv) runSandbox(t *testing.T, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	return e.runSandboxWithHandler(t, cfg, "")
}

func (e *rtEnv) runSandboxWithHandler(t *testing.T, cfg *runtimeapi.PodSandboxConfig, handler string) string {
	t.Helper()
	resp, err := e.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	assert.NilError(t, err)
	assert.Assert(t, resp.PodSandboxId != "")
	return resp.PodSandboxId
}

// rtContainerConfig returns a plain container config named name.
func rtContainerConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: 0},
		Image:    &runtimeapi.ImageSpec{Image: rtContainerImage},
		Labels:   map[string]string{labelContainerName: name},
		LogPath:  name + "/0.log",
	}
}

// createContainer creates cfg in sandbox sbID (made from sbCfg) and returns its ID.
func (e *rtEnv) createContainer(t *testing.T, sbID string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	resp, err := e.svc.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sbID, Config: cfg, SandboxConfig: sbCfg,
	})
	assert.NilError(t, err)
	assert.Assert(t, resp.ContainerId != "")
	return resp.ContainerId
}

// startContainer starts container cid through the service.
func (e *rtEnv) startContainer(t *testing.T, cid string) {
	t.Helper()
	_, err := e.svc.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: cid})
	assert.NilError(t, err)
}

// webSandbox runs the sandbox "web" (rtSandboxConfig) and returns its ID and config.
func (e *rtEnv) webSandbox(t *testing.T) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := rtSandboxConfig("web")
	return e.runSandbox(t, cfg), cfg
}

// runContainer creates the container name (rtContainerConfig) in sandbox sbID and
// starts it.
func (e *rtEnv) runContainer(t *testing.T, sbID string, sbCfg *runtimeapi.PodSandboxConfig, name string) string {
	t.Helper()
	cid := e.createContainer(t, sbID, sbCfg, rtContainerConfig(name))
	e.startContainer(t, cid)
	return cid
}

// exitedContainer runs the container name in sandbox sbID and stops it.
func (e *rtEnv) exitedContainer(t *testing.T, sbID string, sbCfg *runtimeapi.PodSandboxConfig, name string) string {
	t.Helper()
	cid := e.runContainer(t, sbID, sbCfg, name)
	assert.NilError(t, stopContainer(e, cid, 0))
	return cid
}

// spec returns the engine spec of container cid.
func (e *rtEnv) spec(t *testing.T, cid string) docker.ContainerSpec {
	t.Helper()
	s, ok := e.engine.Spec(cid)
	assert.Assert(t, ok, "no container %s in the engine", cid)
	return s
}

// inspect returns the engine's view of container cid.
func (e *rtEnv) inspect(t *testing.T, cid string) docker.ContainerDetails {
	t.Helper()
	d, err := e.engine.InspectContainer(context.Background(), cid)
	assert.NilError(t, err)
	return d
}

// checkpointFile returns the bytes of sandbox sbID's checkpoint file; ok is false
// when there is none.
func (e *rtEnv) checkpointFile(t *testing.T, sbID string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.cpDir, sbID))
	if os.IsNotExist(err) {
		return "", false
	}
	assert.NilError(t, err)
	return string(b), true
}

// writeCheckpoint stores a checkpoint of a sandbox unknown to the engine.
func (e *rtEnv) writeCheckpoint(t *testing.T, sbID string, cfg *runtimeapi.PodSandboxConfig) {
	t.Helper()
	assert.NilError(t, e.checkpoints.Write(sbID, sandboxCheckpoint(cfg)))
}

// rtPorts are one TCP port mapping with a host port.
func rtPorts() []*runtimeapi.PortMapping {
	return []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 18080}}
}

// rtNetPorts are rtPorts as the network plugin sees them.
func rtNetPorts() []network.PortMapping {
	return []network.PortMapping{{Protocol: "tcp", ContainerPort: 80, HostPort: 18080}}
}
