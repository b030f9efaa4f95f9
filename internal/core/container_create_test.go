package core

import (
	"context"
	"regexp"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestCreateContainerSpec(t *testing.T) {
	env := newRTEnv(t)
	sbCfg := rtSandboxConfig("web")
	sbCfg.Linux.CgroupParent = "/kubepods.slice/kubepods-pod1.slice"
	sbID := env.runSandbox(t, sbCfg)

	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: "app", Attempt: 2},
		Image:       &runtimeapi.ImageSpec{Image: rtContainerImage},
		Command:     []string{"/bin/sh"},
		Args:        []string{"-c", "sleep 1000"},
		WorkingDir:  "/work",
		Envs:        []*runtimeapi.KeyValue{{Key: "A", Value: []byte("1")}, {Key: "B", Value: []byte("x=y")}, {Key: "EMPTY"}},
		Labels:      map[string]string{labelContainerName: "app", "tier": "front"},
		Annotations: map[string]string{"io.kubernetes.container.hash": "abc", "note": "n"},
		LogPath:     "app/2.log",
		Tty:         true,
		Stdin:       true,
		StdinOnce:   true,
		StopSignal:  runtimeapi.Signal_SIGNAL_SIGQUIT,
		Mounts: []*runtimeapi.Mount{
			{HostPath: "/data", ContainerPath: "/data", Readonly: true},
			{HostPath: "/h2c", ContainerPath: "/h2c", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
			{HostPath: "/bidi", ContainerPath: "/bidi", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, SelinuxRelabel: true},
		},
		Devices: []*runtimeapi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rwm"}},
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{
				CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, CpusetCpus: "0-1", CpusetMems: "0",
				MemoryLimitInBytes: 256 << 20, OomScoreAdj: 1000, Unified: map[string]string{"memory.high": "200M"},
			},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Capabilities: &runtimeapi.Capability{
					AddCapabilities:  []string{"NET_ADMIN", "cap_sys_time", "CAP_SYS_PTRACE"},
					DropCapabilities: []string{"all"},
				},
				RunAsUser:          &runtimeapi.Int64Value{Value: 1000},
				RunAsGroup:         &runtimeapi.Int64Value{Value: 3000},
				SupplementalGroups: []int64{4000},
				ReadonlyRootfs:     true,
				NoNewPrivs:         true,
				MaskedPaths:        []string{"/proc/kcore", "/proc/keys"},
				ReadonlyPaths:      []string{"/proc/sys"},
				Seccomp:            &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
				Apparmor:           &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "localhost/k8s-app"},
			},
		},
	}
	cid := env.createContainer(t, sbID, sbCfg, cfg)

	want := docker.ContainerSpec{
		Name:  "k8s_app_web_default_web-uid_2",
		Image: rtContainerImage,
		Labels: map[string]string{
			labelContainerName: "app", "tier": "front",
			"annotation.io.kubernetes.container.hash": "abc", "annotation.note": "n",
			"io.kubernetes.docker.type":       "container",
			"io.kubernetes.sandbox.id":        sbID,
			"io.kubernetes.container.logpath": "/var/log/pods/default_web_web-uid/app/2.log",
		},
		// The engine's default runtime is runc: one shim for the pod.
		Annotations:    map[string]string{"io.kubernetes.cri.sandbox-id": sbID},
		Entrypoint:     []string{"/bin/sh"},
		Cmd:            []string{"-c", "sleep 1000"},
		Env:            []string{"A=1", "B=x=y", "EMPTY="},
		WorkingDir:     "/work",
		User:           "1000:3000",
		Tty:            true,
		OpenStdin:      true,
		StdinOnce:      true,
		StopSignal:     "SIGQUIT",
		NetworkMode:    "container:" + sbID,
		PidMode:        "container:" + sbID,
		IpcMode:        "container:" + sbID,
		CgroupParent:   "kubepods-pod1.slice",
		NoHealthcheck:  true,
		ReadonlyRootfs: true,
		CapAdd:         []string{"NET_ADMIN", "SYS_TIME", "SYS_PTRACE"},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"apparmor=k8s-app", "no-new-privileges"},
		MaskedPaths:    []string{"/proc/kcore", "/proc/keys"},
		ReadonlyPaths:  []string{"/proc/sys"},
		OomScoreAdj:    1000,
		GroupAdd:       []string{"4000"},
		Mounts: []docker.Mount{
			{Source: "/data", Target: "/data", ReadOnly: true},
			{Source: "/h2c", Target: "/h2c", Propagation: "rslave"},
			{Source: "/bidi", Target: "/bidi", Propagation: "rshared", SELinuxRelabel: true},
		},
		Devices: []docker.Device{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}},
		Resources: docker.Resources{
			CPUShares: 512, CPUPeriod: 100000, CPUQuota: 50000, CpusetCpus: "0-1", CpusetMems: "0",
			MemoryLimit: 256 << 20, MemorySwap: 256 << 20, Unified: map[string]string{"memory.high": "200M"},
		},
	}
	assert.DeepEqual(t, env.spec(t, cid), want, cmpopts.EquateEmpty())
	assert.Equal(t, env.inspect(t, cid).State, docker.StateCreated)
}

func TestCreateContainerNamespacesAndSecurity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*runtimeapi.ContainerConfig)
		check  func(t *testing.T, sbID string, s docker.ContainerSpec)
	}{
		{
			name: "defaults join the sandbox",
			check: func(t *testing.T, sbID string, s docker.ContainerSpec) {
				assert.Equal(t, s.NetworkMode, "container:"+sbID)
				assert.Equal(t, s.IpcMode, "container:"+sbID)
				assert.Equal(t, s.PidMode, "container:"+sbID)
				assert.DeepEqual(t, s.SecurityOpt, []string{"seccomp=unconfined"})
				assert.Equal(t, s.User, "")
			},
		},
		{
			name: "host pid and ipc",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}
			},
			check: func(t *testing.T, sbID string, s docker.ContainerSpec) {
				assert.Equal(t, s.PidMode, "host")
				assert.Equal(t, s.IpcMode, "host")
				assert.Equal(t, s.NetworkMode, "container:"+sbID)
			},
		},
		{
			name: "own pid namespace",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
			},
			check: func(t *testing.T, sbID string, s docker.ContainerSpec) {
				assert.Equal(t, s.PidMode, "")
				assert.Equal(t, s.IpcMode, "container:"+sbID)
			},
		},
		{
			name: "target pid namespace",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "abc"}
			},
			check: func(t *testing.T, _ string, s docker.ContainerSpec) {
				assert.Equal(t, s.PidMode, "container:abc")
			},
		},
		{
			name: "run as username",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.Linux.SecurityContext.RunAsUsername = "www-data"
				c.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: 33}
			},
			check: func(t *testing.T, _ string, s docker.ContainerSpec) { assert.Equal(t, s.User, "www-data:33") },
		},
		{
			name: "privileged ignores seccomp and masked paths",
			mutate: func(c *runtimeapi.ContainerConfig) {
				sc := c.Linux.SecurityContext
				sc.Privileged = true
				sc.MaskedPaths = []string{"/proc/kcore"}
				sc.ReadonlyPaths = []string{"/proc/sys"}
			},
			check: func(t *testing.T, _ string, s docker.ContainerSpec) {
				assert.Check(t, s.Privileged)
				assert.Check(t, is.Len(s.SecurityOpt, 0))
				assert.Check(t, s.MaskedPaths == nil)
				assert.Check(t, s.ReadonlyPaths == nil)
			},
		},
		{
			name: "explicit swap",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 100, MemorySwapLimitInBytes: 300}
			},
			check: func(t *testing.T, _ string, s docker.ContainerSpec) {
				assert.Equal(t, s.Resources.MemoryLimit, int64(100))
				assert.Equal(t, s.Resources.MemorySwap, int64(300))
			},
		},
		{
			name: "no memory limit, no swap limit",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.Linux.Resources = &runtimeapi.LinuxContainerResources{CpuShares: 2}
			},
			check: func(t *testing.T, _ string, s docker.ContainerSpec) {
				assert.Equal(t, s.Resources.MemorySwap, int64(0))
				assert.Equal(t, s.Resources.CPUShares, int64(2))
			},
		},
		{
			name: "CDI devices from cdi_devices and among devices",
			mutate: func(c *runtimeapi.ContainerConfig) {
				c.CDIDevices = []*runtimeapi.CDIDevice{{Name: "vendor.com/gpu=0"}}
				c.Devices = []*runtimeapi.Device{
					{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rwm"},
					{HostPath: "example.org/fpga=all"},
				}
			},
			check: func(t *testing.T, _ string, s docker.ContainerSpec) {
				assert.DeepEqual(t, s.CDIDevices, []string{"vendor.com/gpu=0", "example.org/fpga=all"})
				assert.DeepEqual(t, s.Devices, []docker.Device{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}})
			},
		},
		{
			name:   "no log path, no label",
			mutate: func(c *runtimeapi.ContainerConfig) { c.LogPath = "" },
			check: func(t *testing.T, _ string, s docker.ContainerSpec) {
				_, ok := s.Labels[labelLogPath]
				assert.Check(t, !ok)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			sbID, sbCfg := env.webSandbox(t)
			cfg := rtContainerConfig("app")
			cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{}}
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			cid := env.createContainer(t, sbID, sbCfg, cfg)
			tc.check(t, sbID, env.spec(t, cid))
		})
	}
}

func TestCreateContainerErrors(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	other := env.createContainer(t, sbID, sbCfg, rtContainerConfig("other"))
	before := len(env.engine.ContainerIDs())
	// app is a request for the container "app" in sbID, changed by mutate.
	app := func(mutate func(c *runtimeapi.ContainerConfig)) func() *runtimeapi.CreateContainerRequest {
		return func() *runtimeapi.CreateContainerRequest {
			c := rtContainerConfig("app")
			mutate(c)
			return rtCreateReq(sbID, sbCfg, c)
		}
	}

	for _, tc := range []struct {
		name    string
		req     func() *runtimeapi.CreateContainerRequest
		errKind func(error) bool
	}{
		{
			name: "unknown sandbox",
			req: func() *runtimeapi.CreateContainerRequest {
				return rtCreateReq("0123456789abcdef", sbCfg, rtContainerConfig("app"))
			},
			errKind: cerrdefs.IsNotFound,
		},
		{
			name:    "container as sandbox",
			req:     func() *runtimeapi.CreateContainerRequest { return rtCreateReq(other, sbCfg, rtContainerConfig("app")) },
			errKind: cerrdefs.IsNotFound,
		},
		{
			name:    "no sandbox id",
			req:     func() *runtimeapi.CreateContainerRequest { return rtCreateReq("", sbCfg, rtContainerConfig("app")) },
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "no name",
			req:     app(func(c *runtimeapi.ContainerConfig) { c.Metadata.Name = "" }),
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "no image",
			req:     app(func(c *runtimeapi.ContainerConfig) { c.Image = nil }),
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name: "image volume",
			req: app(func(c *runtimeapi.ContainerConfig) {
				c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/img", Image: &runtimeapi.ImageSpec{Image: "data:1"}}}
			}),
			errKind: cerrdefs.IsNotImplemented,
		},
		{
			name:    "CDI device name not qualified",
			req:     app(func(c *runtimeapi.ContainerConfig) { c.CDIDevices = []*runtimeapi.CDIDevice{{Name: "gpu0"}} }),
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name: "run as group alone",
			req: app(func(c *runtimeapi.ContainerConfig) {
				c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: &runtimeapi.Int64Value{Value: 1}}}
			}),
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name: "cgroup parent not a slice",
			req: func() *runtimeapi.CreateContainerRequest {
				sb := rtSandboxConfig("web")
				sb.Linux.CgroupParent = "/kubepods/pod1"
				return rtCreateReq(sbID, sb, rtContainerConfig("app"))
			},
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "image not present",
			req:     app(func(c *runtimeapi.ContainerConfig) { c.Image.Image = "nothere:1" }),
			errKind: cerrdefs.IsNotFound,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := env.svc.CreateContainer(context.Background(), tc.req())
			assert.Check(t, tc.errKind(err), "got %v", err)
			assert.Check(t, resp == nil)
			assert.Equal(t, len(env.engine.ContainerIDs()), before)
		})
	}
}

func rtCreateReq(sbID string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) *runtimeapi.CreateContainerRequest {
	return &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, SandboxConfig: sbCfg, Config: cfg}
}

// TestCreateContainerNameConflict: a container's name conflict is handled as a
// sandbox's (TestNameConflict), as upstream: a live holder fails the create, a
// non-running one is removed and the create fails for kubelet to retry, and only a
// holder gone by then gets the random suffix, under which the container is one like
// any other.
func TestCreateContainerNameConflict(t *testing.T) {
	env := newRTEnv(t)
	ctx := context.Background()
	sbID, sbCfg := env.webSandbox(t)
	first := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))

	env.engine.SetContainerState(first, docker.StateRunning, 0)
	_, err := env.svc.CreateContainer(ctx, rtCreateReq(sbID, sbCfg, rtContainerConfig("app")))
	assert.Check(t, cerrdefs.IsAlreadyExists(err), "%v", err)
	_, err = env.engine.InspectContainer(ctx, first)
	assert.Check(t, err == nil, "a running holder stays: %v", err)

	env.engine.SetContainerState(first, docker.StateExited, 0)
	_, err = env.svc.CreateContainer(ctx, rtCreateReq(sbID, sbCfg, rtContainerConfig("app")))
	assert.Check(t, cerrdefs.IsAlreadyExists(err), "%v", err)
	_, err = env.engine.InspectContainer(ctx, first)
	assert.Check(t, cerrdefs.IsNotFound(err), "an exited holder is removed: %v", err)
	retried := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app")) // kubelet's retry
	assert.Equal(t, env.spec(t, retried).Name, "k8s_app_web_default_web-uid_0")

	env.engine.RemoveBefore("InspectContainer", retried)
	second := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	assert.Check(t, retried != second)
	name := env.spec(t, second).Name
	assert.Check(t, regexp.MustCompile(`^k8s_app_web_default_web-uid_0_[0-9a-f]{8}$`).MatchString(name), name)
	st, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: second})
	assert.NilError(t, err)
	assert.Equal(t, st.Status.Metadata.Name, "app")
}

// Containers of a host-network pod see the node's hostname, and every container runs
// with its pod's runtime handler.
func TestCreateContainerFollowsItsPod(t *testing.T) {
	env := newRTEnv(t)
	sbCfg := rtSandboxConfig("web")
	rtHostNetwork(sbCfg)
	sbID := env.runSandboxWithHandler(t, sbCfg, "io.containerd.runc.v2")
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	spec := env.spec(t, cid)
	assert.Equal(t, spec.UTSMode, "host")
	assert.Equal(t, spec.Runtime, "io.containerd.runc.v2")
	assert.Equal(t, spec.NetworkMode, "container:"+sbID)

	sbCfg = rtSandboxConfig("pod")
	sbID = env.runSandbox(t, sbCfg)
	spec = env.spec(t, env.createContainer(t, sbID, sbCfg, rtContainerConfig("app")))
	assert.Equal(t, spec.UTSMode, "")
	assert.Equal(t, spec.Runtime, "")
}

// A container under the runc shim names its sandbox for the shim to serve it from the
// pod's shim process; under another runtime's shim it does not.
func TestCreateContainerShimGroup(t *testing.T) {
	for _, tc := range []struct {
		name, defaultRuntime, handler string
		grouped                       bool
	}{
		{name: "engine default runc", defaultRuntime: "runc", grouped: true},
		{name: "handler runc v2", defaultRuntime: "runsc", handler: "io.containerd.runc.v2", grouped: true},
		{name: "engine default runsc", defaultRuntime: "runsc"},
		{name: "handler kata", defaultRuntime: "runc", handler: "kata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			env.engine.SetInfo(docker.Info{
				Driver: "overlay2", DockerRootDir: env.dockerRoot, CgroupDriver: "systemd",
				Runtimes: []string{"io.containerd.runc.v2", "runc", "runsc", "kata"}, DefaultRuntime: tc.defaultRuntime,
			})
			sbCfg := rtSandboxConfig("web")
			sbID := env.runSandboxWithHandler(t, sbCfg, tc.handler)
			spec := env.spec(t, env.createContainer(t, sbID, sbCfg, rtContainerConfig("app")))
			if tc.grouped {
				assert.DeepEqual(t, spec.Annotations, map[string]string{"io.kubernetes.cri.sandbox-id": sbID})
			} else {
				assert.Check(t, is.Len(spec.Annotations, 0))
			}
			assert.Check(t, is.Len(env.spec(t, sbID).Annotations, 0), "the pause container starts the pod's shim")
		})
	}
}
