package core

import (
	"context"
	"slices"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestAdjustSpec(t *testing.T) {
	base := docker.ContainerSpec{
		Name: "c", Labels: map[string]string{"annotation.keep": "1", "annotation.drop": "2"},
		Env:       []string{"KEEP=1", "DROP=2", "SET=old"},
		Mounts:    []docker.Mount{{Source: "/a", Target: "/a"}, {Source: "/b", Target: "/b"}},
		Resources: docker.Resources{CPUShares: 2, Ulimits: []docker.Ulimit{{Name: "nofile", Soft: 1, Hard: 2}}},
	}
	tests := []struct {
		name    string
		adj     *nriapi.ContainerAdjustment
		want    func(s *docker.ContainerSpec)
		refused string // substring of the error; "" = applied
	}{
		{name: "nothing", adj: &nriapi.ContainerAdjustment{}, want: func(*docker.ContainerSpec) {}},
		{
			name: "env",
			adj:  &nriapi.ContainerAdjustment{Env: []*nriapi.KeyValue{{Key: "-DROP"}, {Key: "SET", Value: "new"}, {Key: "ADD", Value: "x"}}},
			want: func(s *docker.ContainerSpec) { s.Env = []string{"KEEP=1", "SET=new", "ADD=x"} },
		},
		{
			name: "annotations",
			adj:  &nriapi.ContainerAdjustment{Annotations: map[string]string{"-drop": "", "new": "v"}},
			want: func(s *docker.ContainerSpec) {
				s.Labels = map[string]string{"annotation.keep": "1", "annotation.new": "v"}
			},
		},
		{
			name: "mounts",
			adj: &nriapi.ContainerAdjustment{Mounts: []*nriapi.Mount{
				{Destination: "-/b"}, {Destination: "/a", Source: "/host/a", Type: "bind", Options: []string{"rbind", "ro", "rslave"}},
			}},
			want: func(s *docker.ContainerSpec) {
				s.Mounts = []docker.Mount{{Source: "/host/a", Target: "/a", ReadOnly: true, Propagation: "rslave"}}
			},
		},
		{
			name: "rlimits, CDI devices, devices, args",
			adj: &nriapi.ContainerAdjustment{
				Rlimits:    []*nriapi.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 10, Hard: ^uint64(0)}, {Type: "RLIMIT_NPROC", Soft: 5, Hard: 6}},
				CDIDevices: []*nriapi.CDIDevice{{Name: "vendor.com/gpu=0"}},
				Args:       []string{"/bin/app", "--flag"},
				Linux:      &nriapi.LinuxContainerAdjustment{Devices: []*nriapi.LinuxDevice{{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229}}},
			},
			want: func(s *docker.ContainerSpec) {
				s.Resources.Ulimits = []docker.Ulimit{{Name: "nofile", Soft: 10, Hard: -1}, {Name: "nproc", Soft: 5, Hard: 6}}
				s.CDIDevices = []string{"vendor.com/gpu=0"}
				s.Entrypoint, s.Cmd = []string{"/bin/app", "--flag"}, []string{}
				s.Devices = []docker.Device{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}}
			},
		},
		{
			name: "resources, OOM score, sysctl",
			adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{
				Resources: &nriapi.LinuxResources{
					Cpu:    &nriapi.LinuxCPU{Shares: nriapi.UInt64(512), Quota: nriapi.Int64(50000), Period: nriapi.UInt64(100000), Cpus: "0-1", Mems: "0"},
					Memory: &nriapi.LinuxMemory{Limit: nriapi.Int64(1 << 20), Swap: nriapi.Int64(2 << 20)},
					Pids:   &nriapi.LinuxPids{Limit: 64},
				},
				OomScoreAdj: nriapi.Int(500),
				Sysctl:      map[string]string{"net.ipv4.ip_forward": "1"},
			}},
			want: func(s *docker.ContainerSpec) {
				s.Resources.CPUShares, s.Resources.CPUQuota, s.Resources.CPUPeriod = 512, 50000, 100000
				s.Resources.CpusetCpus, s.Resources.CpusetMems = "0-1", "0"
				s.Resources.MemoryLimit, s.Resources.MemorySwap, s.Resources.PidsLimit = 1<<20, 2<<20, 64
				s.OomScoreAdj = 500
				s.Sysctls = map[string]string{"net.ipv4.ip_forward": "1"}
			},
		},
		{name: "hooks", adj: &nriapi.ContainerAdjustment{Hooks: &nriapi.Hooks{Prestart: []*nriapi.Hook{{Path: "/bin/true"}}}}, refused: "hooks (Docker Engine runs no OCI hooks)"},
		{name: "tmpfs mount", adj: &nriapi.ContainerAdjustment{Mounts: []*nriapi.Mount{{Destination: "/t", Type: "tmpfs", Source: "tmpfs"}}}, refused: `mounts[/t] (type "tmpfs"`},
		{name: "mount option", adj: &nriapi.ContainerAdjustment{Mounts: []*nriapi.Mount{{Destination: "/t", Source: "/t", Options: []string{"nosuid"}}}}, refused: `option "nosuid"`},
		{name: "cgroups path", adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{CgroupsPath: "/x"}}, refused: "linux.cgroups_path"},
		{name: "namespaces", adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{Namespaces: []*nriapi.LinuxNamespace{{Type: "network"}}}}, refused: "linux.namespaces"},
		{name: "hugepages", adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{Resources: &nriapi.LinuxResources{HugepageLimits: []*nriapi.HugepageLimit{{PageSize: "2MB", Limit: 1}}}}}, refused: "linux.resources.hugepage_limits"},
		{name: "unified", adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{Resources: &nriapi.LinuxResources{Unified: map[string]string{"memory.high": "1"}}}}, refused: "linux.resources.unified"},
		{name: "memory reservation", adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{Resources: &nriapi.LinuxResources{Memory: &nriapi.LinuxMemory{Reservation: nriapi.Int64(1)}}}}, refused: "linux.resources.memory.reservation"},
		{name: "scheduler", adj: &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{Scheduler: &nriapi.LinuxScheduler{}}}, refused: "linux.scheduler"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := cloneSpec(base)
			got, err := adjustSpec(in, tc.adj)
			assert.Check(t, is.DeepEqual(in, cloneSpec(base)), "the input spec is not changed")
			if tc.refused != "" {
				assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
				assert.Check(t, is.ErrorContains(err, tc.refused))
				return
			}
			assert.NilError(t, err)
			want := cloneSpec(base)
			tc.want(&want)
			assert.Check(t, is.DeepEqual(got, want))
		})
	}
}

// Adjustments the engine cannot make to a created container: the container is made
// again with them (the first one removed, relayed), and the plugins asked again.
func TestNRIAdjustmentRecreates(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	plugins.SetAdjust(func(*nriapi.Container) *nriapi.ContainerAdjustment {
		return &nriapi.ContainerAdjustment{
			Env:         []*nriapi.KeyValue{{Key: "FROM_NRI", Value: "yes"}},
			Mounts:      []*nriapi.Mount{{Destination: "/nri", Source: "/tmp", Type: "bind", Options: []string{"rbind", "ro"}}},
			Annotations: map[string]string{"nri.example.com/seen": "true"},
		}
	})
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	spec := env.spec(t, cid)
	assert.Check(t, slices.Contains(spec.Env, "FROM_NRI=yes"))
	assert.Check(t, slices.Contains(spec.Mounts, docker.Mount{Source: "/tmp", Target: "/nri", ReadOnly: true}))
	assert.Check(t, is.Equal(spec.Labels["annotation.nri.example.com/seen"], "true"))
	ev := plugins.Events()
	assert.Assert(t, is.Len(ev, 5), "%v", ev)
	first := ev[1][len("CreateContainer "):]
	assert.Check(t, first != cid)
	assert.Check(t, is.DeepEqual(ev[1:], []string{
		"CreateContainer " + first, "RemoveContainer " + first, "CreateContainer " + cid, "PostCreateContainer " + cid,
	}))
	assert.Check(t, is.DeepEqual(env.engine.ContainerIDs(), sorted(sbID, cid)))
	st, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(st.Status.Annotations["nri.example.com/seen"], "true"))
}

// Resources only: applied to the container created first, which is kept.
func TestNRIAdjustmentResourcesInPlace(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	plugins.SetAdjust(func(*nriapi.Container) *nriapi.ContainerAdjustment {
		return &nriapi.ContainerAdjustment{Linux: &nriapi.LinuxContainerAdjustment{Resources: &nriapi.LinuxResources{
			Cpu: &nriapi.LinuxCPU{Cpus: "1"}, Memory: &nriapi.LinuxMemory{Limit: nriapi.Int64(64 << 20)},
		}}}
	})
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))
	res := env.spec(t, cid).Resources
	assert.Check(t, is.Equal(res.CpusetCpus, "1"))
	assert.Check(t, is.Equal(res.MemoryLimit, int64(64<<20)))
	assert.Check(t, is.DeepEqual(plugins.Events()[1:], []string{"CreateContainer " + cid, "PostCreateContainer " + cid}))
}

// An adjustment the engine cannot express fails the create, naming it, with nothing left.
func TestNRIAdjustmentRefused(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	plugins.SetAdjust(func(*nriapi.Container) *nriapi.ContainerAdjustment {
		return &nriapi.ContainerAdjustment{Hooks: &nriapi.Hooks{Poststart: []*nriapi.Hook{{Path: "/bin/hook"}}}}
	})
	_, err := env.svc.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sbID, Config: rtContainerConfig("app"), SandboxConfig: sbCfg,
	})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "NRI plugins asked for what Docker Engine cannot express: hooks"))
	assert.Check(t, is.DeepEqual(env.engine.ContainerIDs(), []string{sbID}))
	assert.Check(t, is.Len(listedContainers(t, env), 0))
}

// UpdateContainerResources applies the resources as the plugins adjusted them.
func TestNRIUpdateContainerResources(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	_, err := env.svc.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: cid, Linux: &runtimeapi.LinuxContainerResources{CpuShares: 256, MemoryLimitInBytes: 32 << 20},
	})
	assert.NilError(t, err)
	res := env.spec(t, cid).Resources
	assert.Check(t, is.Equal(res.CPUShares, int64(256)))
	assert.Check(t, is.Equal(res.CpusetCpus, "0"), "the plugin's adjustment")
	ev := plugins.Events()
	assert.Check(t, is.DeepEqual(ev[len(ev)-2:], []string{"UpdateContainer " + cid, "PostUpdateContainer " + cid}))
}

// A newly connected plugin is synchronised with what the CRI shows.
func TestNRIState(t *testing.T) {
	plugins := newFakeNRI()
	env := newRTEnv(t, withNRI(plugins))
	sbID, sbCfg := env.webSandbox(t)
	cid := env.runContainer(t, sbID, sbCfg, "app")
	pods, ctrs, err := env.svc.NRIState(context.Background())
	assert.NilError(t, err)
	assert.Assert(t, is.Len(pods, 1))
	assert.Check(t, is.Equal(pods[0].GetId(), sbID))
	assert.Check(t, is.Equal(pods[0].GetName(), "web"))
	assert.Check(t, is.Equal(pods[0].GetUid(), "web-uid"))
	assert.Assert(t, is.Len(ctrs, 1))
	assert.Check(t, is.Equal(ctrs[0].GetId(), cid))
	assert.Check(t, is.Equal(ctrs[0].GetName(), "app"))
	assert.Check(t, is.Equal(ctrs[0].GetPodSandboxId(), sbID))
	assert.Check(t, is.Equal(ctrs[0].GetState(), nriapi.ContainerState_CONTAINER_RUNNING))
}
