package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/network"
)

// rtSandboxSpec is the engine spec of rtSandboxConfig("web") with a CNI network.
func rtSandboxSpec() docker.ContainerSpec {
	return docker.ContainerSpec{
		Name:  "k8s_POD_web_default_web-uid_1",
		Image: rtSandboxImage,
		Labels: map[string]string{
			labelPodName: "web", labelPodNamespace: "default", labelPodUID: "web-uid",
			"annotation.kubernetes.io/config.source": "api",
			"io.kubernetes.docker.type":              "podsandbox",
			"io.kubernetes.container.name":           "POD",
		},
		OomScoreAdj: -998,
		Resources:   docker.Resources{CPUShares: 2},
		SecurityOpt: []string{"no-new-privileges"},
		IpcMode:     "shareable",
		NetworkMode: "none",
		Hostname:    "web",
	}
}

func TestRunPodSandboxSpec(t *testing.T) {
	profile := writeSeccompProfile(t, prettySeccomp)
	for _, tc := range []struct {
		name      string
		opts      []rtOption
		mutate    func(*runtimeapi.PodSandboxConfig)
		handler   string
		wantSpec  func(*docker.ContainerSpec)
		wantSetUp bool
	}{
		{name: "cni", wantSpec: func(*docker.ContainerSpec) {}, wantSetUp: true},
		{
			name: "docker bridge publishes ports",
			opts: []rtOption{rtWithoutNetwork()},
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.PortMappings = []*runtimeapi.PortMapping{
					{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 18080},
					{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
					{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080}, // declared only: never published
				}
			},
			wantSpec: func(s *docker.ContainerSpec) {
				s.NetworkMode = "default"
				s.PortBindings = []docker.PortBinding{
					{Protocol: "tcp", ContainerPort: 80, HostPort: 18080},
					{Protocol: "udp", ContainerPort: 53, HostPort: 5353, HostIP: "127.0.0.1"},
				}
			},
		},
		{
			name: "cni does not publish ports",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.PortMappings = rtPorts()
			},
			wantSpec:  func(*docker.ContainerSpec) {},
			wantSetUp: true,
		},
		{
			name:   "host network",
			mutate: func(c *runtimeapi.PodSandboxConfig) { rtHostNetwork(c) },
			wantSpec: func(s *docker.ContainerSpec) {
				s.NetworkMode = "host"
				s.UTSMode = "host"
				s.Hostname = ""
			},
		},
		{
			name:   "host network without cni",
			opts:   []rtOption{rtWithoutNetwork()},
			mutate: func(c *runtimeapi.PodSandboxConfig) { rtHostNetwork(c); c.PortMappings = rtPorts() },
			wantSpec: func(s *docker.ContainerSpec) {
				s.NetworkMode = "host"
				s.UTSMode = "host"
				s.Hostname = ""
			},
		},
		{
			name: "host pid and ipc",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_NODE
				c.Linux.SecurityContext.NamespaceOptions.Ipc = runtimeapi.NamespaceMode_NODE
			},
			wantSpec: func(s *docker.ContainerSpec) {
				s.PidMode = "host"
				s.IpcMode = "host"
			},
			wantSetUp: true,
		},
		{
			name: "pod pid namespace",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_POD
			},
			wantSpec:  func(*docker.ContainerSpec) {},
			wantSetUp: true,
		},
		{
			name: "sysctls",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "kernel.shm_rmid_forced": "1"}
			},
			wantSpec: func(s *docker.ContainerSpec) {
				s.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "kernel.shm_rmid_forced": "1"}
			},
			wantSetUp: true,
		},
		{
			name:      "systemd cgroup parent",
			mutate:    func(c *runtimeapi.PodSandboxConfig) { c.Linux.CgroupParent = "/test.slice" },
			wantSpec:  func(s *docker.ContainerSpec) { s.CgroupParent = "test.slice" },
			wantSetUp: true,
		},
		{
			name: "systemd nested cgroup parent",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.CgroupParent = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice"
			},
			wantSpec:  func(s *docker.ContainerSpec) { s.CgroupParent = "kubepods-besteffort-pod1.slice" },
			wantSetUp: true,
		},
		{
			name:      "cgroupfs cgroup parent",
			opts:      []rtOption{rtWithCgroupDriver("cgroupfs")},
			mutate:    func(c *runtimeapi.PodSandboxConfig) { c.Linux.CgroupParent = "/kubepods/besteffort/pod1" },
			wantSpec:  func(s *docker.ContainerSpec) { s.CgroupParent = "/kubepods/besteffort/pod1" },
			wantSetUp: true,
		},
		{
			name: "security context",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				sc := c.Linux.SecurityContext
				sc.RunAsUser = &runtimeapi.Int64Value{Value: 1000}
				sc.RunAsGroup = &runtimeapi.Int64Value{Value: 2000}
				sc.SupplementalGroups = []int64{3000, 4000}
				sc.ReadonlyRootfs = true
			},
			wantSpec: func(s *docker.ContainerSpec) {
				s.User = "1000:2000"
				s.GroupAdd = []string{"3000", "4000"}
				s.ReadonlyRootfs = true
			},
			wantSetUp: true,
		},
		{
			name: "run as user only",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 65535}
			},
			wantSpec:  func(s *docker.ContainerSpec) { s.User = "65535" },
			wantSetUp: true,
		},
		{
			name: "privileged",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Privileged = true
				c.Linux.SecurityContext.Seccomp = nil
			},
			wantSpec:  func(s *docker.ContainerSpec) { s.Privileged = true },
			wantSetUp: true,
		},
		{
			name: "the pause container keeps the engine's seccomp profile whatever the pod's",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: profile}
			},
			wantSpec:  func(*docker.ContainerSpec) {},
			wantSetUp: true,
		},
		{
			name: "pod resources stay on the cgroup parent",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux.Resources = &runtimeapi.LinuxContainerResources{CpuShares: 1024, MemoryLimitInBytes: 1 << 30}
			},
			wantSpec:  func(*docker.ContainerSpec) {},
			wantSetUp: true,
		},
		{
			name:      "runtime handler of the engine",
			handler:   "io.containerd.runc.v2",
			wantSpec:  func(s *docker.ContainerSpec) { s.Runtime = "io.containerd.runc.v2" },
			wantSetUp: true,
		},
		{name: "runtime handler docker is the default", handler: "docker", wantSpec: func(*docker.ContainerSpec) {}, wantSetUp: true},
		{
			name: "no linux config",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.Linux = nil
			},
			wantSpec:  func(*docker.ContainerSpec) {},
			wantSetUp: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t, tc.opts...)
			cfg := rtSandboxConfig("web")
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			sbID := env.runSandboxWithHandler(t, cfg, tc.handler)
			want := rtSandboxSpec()
			if env.net == nil {
				want.NetworkMode = "default"
			}
			tc.wantSpec(&want)
			assert.DeepEqual(t, env.spec(t, sbID), want, cmpopts.EquateEmpty())
			assert.Equal(t, env.inspect(t, sbID).State, docker.StateRunning)
			if env.net != nil {
				assert.Equal(t, len(env.net.SetUps()) == 1, tc.wantSetUp, "set ups: %+v", env.net.SetUps())
			}
		})
	}
}

func TestRunPodSandboxInvalid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []rtOption
		mutate func(*runtimeapi.RunPodSandboxRequest)
	}{
		{name: "no config", mutate: func(r *runtimeapi.RunPodSandboxRequest) { r.Config = nil }},
		{name: "no metadata", mutate: func(r *runtimeapi.RunPodSandboxRequest) { r.Config.Metadata = nil }},
		{name: "no name", mutate: func(r *runtimeapi.RunPodSandboxRequest) { r.Config.Metadata.Name = "" }},
		{name: "no namespace", mutate: func(r *runtimeapi.RunPodSandboxRequest) { r.Config.Metadata.Namespace = "" }},
		{name: "no uid", mutate: func(r *runtimeapi.RunPodSandboxRequest) { r.Config.Metadata.Uid = "" }},
		{name: "runtime handler", mutate: func(r *runtimeapi.RunPodSandboxRequest) { r.RuntimeHandler = "kata" }},
		{name: "not a systemd slice", mutate: func(r *runtimeapi.RunPodSandboxRequest) {
			r.Config.Linux.CgroupParent = "/kubepods/besteffort/pod1"
		}},
		{name: "run as group alone", mutate: func(r *runtimeapi.RunPodSandboxRequest) {
			r.Config.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: 2000}
		}},
		{name: "bad bandwidth annotation", mutate: func(r *runtimeapi.RunPodSandboxRequest) {
			r.Config.Annotations[network.IngressBandwidthAnnotation] = "1"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t, tc.opts...)
			req := &runtimeapi.RunPodSandboxRequest{Config: rtSandboxConfig("web")}
			tc.mutate(req)
			resp, err := env.svc.RunPodSandbox(context.Background(), req)
			assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %v", err)
			assert.Check(t, resp == nil)
			assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
			ids, err := env.checkpoints.List()
			assert.NilError(t, err)
			assert.Check(t, is.Len(ids, 0))
			if env.net != nil {
				assert.Check(t, is.Len(env.net.SetUps(), 0))
			}
		})
	}
}

func TestRunPodSandboxCheckpoint(t *testing.T) {
	zero := int32(0)
	eighty := int32(80)
	tcp := checkpoint.ProtocolTCP
	for _, tc := range []struct {
		name   string
		mutate func(*runtimeapi.PodSandboxConfig)
		want   string
	}{
		{
			name:   "port mapping",
			mutate: func(c *runtimeapi.PodSandboxConfig) { c.PortMappings = rtPorts() },
			want:   `{"version":"v1","name":"web","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]},"checksum":2344035810}`,
		},
		{
			name:   "host network",
			mutate: func(c *runtimeapi.PodSandboxConfig) { rtHostNetwork(c) },
			want:   `{"version":"v1","name":"web","namespace":"default","data":{"host_network":true},"checksum":12315789}`,
		},
		{
			name: "neither",
			want: `{"version":"v1","name":"web","namespace":"default","data":{},"checksum":2305795928}`,
		},
		{
			// Upstream (constructPodSandboxCheckpoint) keeps every port mapping kubelet
			// sends, container-only ports (host port 0) included.
			name: "container port without host port, as upstream",
			mutate: func(c *runtimeapi.PodSandboxConfig) {
				c.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80}}
			},
			want: fmt.Sprintf(`{"version":"v1","name":"web","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":0}]},"checksum":%d}`,
				checkpoint.Checksum(&checkpoint.Data{PortMappings: []*checkpoint.PortMapping{{Protocol: &tcp, ContainerPort: &eighty, HostPort: &zero}}})),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			cfg := rtSandboxConfig("web")
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			sbID := env.runSandbox(t, cfg)
			got, ok := env.checkpointFile(t, sbID)
			assert.Assert(t, ok, "no checkpoint")
			assert.Equal(t, got, tc.want)
			fi, err := os.Stat(filepath.Join(env.cpDir, sbID))
			assert.NilError(t, err)
			assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o600))
		})
	}
}

func TestRunPodSandboxPullsSandboxImage(t *testing.T) {
	env := newRTEnv(t, rtWithoutSandboxImage())
	env.engine.AddRemote(rtSandboxImage, testImage(9001))
	sbID := env.runSandbox(t, rtSandboxConfig("web"))
	assert.Equal(t, len(env.engine.Pulls()), 1)
	img, err := env.engine.InspectImage(context.Background(), rtSandboxImage)
	assert.NilError(t, err)
	assert.Equal(t, env.inspect(t, sbID).ImageID, img.ID)

	// Present now: no second pull.
	env.runSandbox(t, rtSandboxConfig("other"))
	assert.Equal(t, len(env.engine.Pulls()), 1)
}

func TestRunPodSandboxUnpullableSandboxImage(t *testing.T) {
	env := newRTEnv(t, rtWithoutSandboxImage())
	_, err := env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: rtSandboxConfig("web")})
	assert.Check(t, err != nil)
	assert.Check(t, is.ErrorContains(err, rtSandboxImage))
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
	assert.Check(t, is.Len(env.net.SetUps(), 0))

	env.engine.AddRemote(rtSandboxImage, testImage(9001))
	env.engine.InjectError("PullImage", fmt.Errorf("registry down: %w", cerrdefs.ErrUnavailable))
	_, err = env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: rtSandboxConfig("web")})
	assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
	assert.Check(t, is.Len(env.engine.ContainerIDs(), 0))
}

// TestRunPodSandboxNameConflict: a sandbox made under upstream's random suffix (the
// container holding its name went away during the create) is a sandbox like any other.
// TestNameConflict has the other outcomes of a conflict.
func TestRunPodSandboxNameConflict(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	ctx := context.Background()
	other, err := env.engine.CreateContainer(ctx, docker.ContainerSpec{Name: makeSandboxName(cfg.Metadata), Image: rtSandboxImage})
	assert.NilError(t, err)
	env.engine.RemoveBefore("InspectContainer", other)

	sbID := env.runSandbox(t, cfg)
	assert.Check(t, sbID != other)
	name := env.spec(t, sbID).Name
	assert.Check(t, regexp.MustCompile(`^k8s_POD_web_default_web-uid_1_[0-9a-f]{8}$`).MatchString(name), name)

	st, err := env.svc.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	assert.NilError(t, err)
	assert.Equal(t, st.Status.Metadata.Name, "web")
	assert.Equal(t, st.Status.Metadata.Attempt, uint32(1))
	assert.Equal(t, st.Status.State, runtimeapi.PodSandboxState_SANDBOX_READY)
}
