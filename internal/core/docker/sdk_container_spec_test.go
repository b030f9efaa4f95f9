package docker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"
	"gotest.tools/v3/assert"
)

func TestCreateContainerMapsSpec(t *testing.T) {
	var got container.CreateRequest
	var raw map[string]json.RawMessage
	var name string
	c := routedEngine(t, map[string]http.HandlerFunc{
		"POST /containers/create": func(w http.ResponseWriter, r *http.Request) {
			name = r.URL.Query().Get("name")
			body, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(body, &got)
			_ = json.Unmarshal(body, &raw)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"Id":"c0ffee","Warnings":[]}`))
		},
	})
	spec := ContainerSpec{
		Name:        "k8s_app_pod_ns_uid_0",
		Image:       "busybox:1.36",
		Labels:      map[string]string{"io.kubernetes.pod.name": "pod"},
		Entrypoint:  []string{"/bin/sh", "-c"},
		Cmd:         []string{"sleep 1"},
		Env:         []string{"A=1"},
		WorkingDir:  "/work",
		User:        "1000:1000",
		Hostname:    "pod",
		Domainname:  "example",
		Tty:         true,
		OpenStdin:   true,
		StdinOnce:   true,
		StopSignal:  "SIGINT",
		NetworkMode: "container:abc",
		PidMode:     "host",
		IpcMode:     "shareable",
		UTSMode:     "host",

		CgroupParent:   "/kubepods/pod1",
		LogConfig:      &LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
		Privileged:     true,
		ReadonlyRootfs: true,
		CapAdd:         []string{"NET_ADMIN"},
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"seccomp=unconfined", "no-new-privileges"},
		MaskedPaths:    []string{}, // replaces the engine's defaults with nothing
		ReadonlyPaths:  nil,        // keeps the engine's defaults
		Sysctls:        map[string]string{"net.ipv4.ip_forward": "1"},
		OomScoreAdj:    -998,
		GroupAdd:       []string{"5"},
		DNS:            []string{"10.0.0.10"},
		DNSSearch:      []string{"svc.cluster.local"},
		DNSOptions:     []string{"ndots:5"},
		ExtraHosts:     []string{"host:10.0.0.1"},
		PortBindings: []PortBinding{
			{Protocol: "tcp", ContainerPort: 80, HostIP: "127.0.0.1", HostPort: 8080},
			{Protocol: "", ContainerPort: 80, HostPort: 0},
			{Protocol: "UDP", ContainerPort: 53, HostPort: 5353},
		},
		ShmSize: 64 << 20,
		Mounts: []Mount{
			{Source: "/var/lib/kubelet/pods/x/volumes/cm", Target: "/etc/cm", ReadOnly: true, SELinuxRelabel: true},
			{Source: "/mnt/shared", Target: "/shared", Propagation: "rshared"},
			{Source: "/etc/hosts-pod", Target: "/etc/hosts"},
		},
		Devices:    []Device{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}},
		CDIDevices: []string{"vendor.com/gpu=0", "vendor.com/gpu=1"},
		ImageMounts: []ImageMount{
			{Image: "sha256:0123", Target: "/data"},
			{Image: "tools:1", Target: "/tools", SubPath: "usr/bin"},
		},
		Resources: Resources{
			CPUShares: 512, CPUPeriod: 100000, CPUQuota: 50000, CpusetCpus: "0-1", CpusetMems: "0",
			MemoryLimit: 128 << 20, MemorySwap: 128 << 20, PidsLimit: 100,
			Ulimits: []Ulimit{{Name: "nofile", Soft: 1024, Hard: 4096}},
		},
	}
	id, err := c.CreateContainer(context.Background(), spec)
	assert.NilError(t, err)
	assert.Equal(t, id, "c0ffee")
	assert.Equal(t, name, spec.Name)

	cfg := got.Config
	assert.Assert(t, cfg != nil)
	assert.Equal(t, cfg.Image, "busybox:1.36")
	assert.DeepEqual(t, cfg.Labels, spec.Labels)
	assert.DeepEqual(t, []string(cfg.Entrypoint), spec.Entrypoint)
	assert.DeepEqual(t, []string(cfg.Cmd), spec.Cmd)
	assert.DeepEqual(t, cfg.Env, spec.Env)
	assert.Equal(t, cfg.WorkingDir, "/work")
	assert.Equal(t, cfg.User, "1000:1000")
	assert.Equal(t, cfg.Hostname, "pod")
	assert.Equal(t, cfg.Domainname, "example")
	assert.Assert(t, cfg.Tty && cfg.OpenStdin && cfg.StdinOnce)
	assert.Equal(t, cfg.StopSignal, "SIGINT")
	assert.DeepEqual(t, cfg.ExposedPorts, nat.PortSet{"80/tcp": {}, "53/udp": {}})

	h := got.HostConfig
	assert.Assert(t, h != nil)
	wantBinds, wantMounts := sdkBindsAndMounts(spec.Mounts, selinuxEnabled()) // checked on their own below
	assert.DeepEqual(t, h.Binds, wantBinds)
	wantMounts = append(wantMounts,
		mount.Mount{Type: mount.TypeImage, Source: "sha256:0123", Target: "/data", ReadOnly: true},
		mount.Mount{Type: mount.TypeImage, Source: "tools:1", Target: "/tools", ReadOnly: true, ImageOptions: &mount.ImageOptions{Subpath: "usr/bin"}})
	assert.DeepEqual(t, h.Mounts, wantMounts)
	assert.DeepEqual(t, h.PortBindings, nat.PortMap{
		"80/tcp": {{HostIP: "127.0.0.1", HostPort: "8080"}, {HostIP: "", HostPort: ""}},
		"53/udp": {{HostIP: "", HostPort: "5353"}},
	})
	assert.Equal(t, string(h.NetworkMode), "container:abc")
	assert.Equal(t, string(h.PidMode), "host")
	assert.Equal(t, string(h.IpcMode), "shareable")
	assert.Equal(t, string(h.UTSMode), "host")
	assert.Equal(t, h.CgroupParent, "/kubepods/pod1")
	assert.DeepEqual(t, h.LogConfig, container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}})
	assert.Assert(t, h.Privileged && h.ReadonlyRootfs)
	// The SDK normalises capability names for the engine.
	assert.DeepEqual(t, []string(h.CapAdd), []string{"CAP_NET_ADMIN"})
	assert.DeepEqual(t, []string(h.CapDrop), []string{"ALL"})
	assert.DeepEqual(t, h.SecurityOpt, spec.SecurityOpt)
	assert.DeepEqual(t, h.Sysctls, spec.Sysctls)
	assert.Equal(t, h.OomScoreAdj, -998)
	assert.DeepEqual(t, h.GroupAdd, spec.GroupAdd)
	assert.DeepEqual(t, h.DNS, spec.DNS)
	assert.DeepEqual(t, h.DNSSearch, spec.DNSSearch)
	assert.DeepEqual(t, h.DNSOptions, spec.DNSOptions)
	assert.DeepEqual(t, h.ExtraHosts, spec.ExtraHosts)
	assert.Equal(t, h.ShmSize, int64(64<<20))
	assert.DeepEqual(t, h.Devices, []container.DeviceMapping{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}})
	assert.DeepEqual(t, h.DeviceRequests, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"vendor.com/gpu=0", "vendor.com/gpu=1"}}})
	assert.Equal(t, h.CPUShares, int64(512))
	assert.Equal(t, h.CPUPeriod, int64(100000))
	assert.Equal(t, h.CPUQuota, int64(50000))
	assert.Equal(t, h.CpusetCpus, "0-1")
	assert.Equal(t, h.CpusetMems, "0")
	assert.Equal(t, h.Memory, int64(128<<20))
	assert.Equal(t, h.MemorySwap, int64(128<<20))
	assert.Assert(t, h.PidsLimit != nil && *h.PidsLimit == 100)
	assert.Equal(t, len(h.Ulimits), 1)
	assert.DeepEqual(t, *h.Ulimits[0], container.Ulimit{Name: "nofile", Soft: 1024, Hard: 4096})

	// MaskedPaths: [] overrides the defaults; ReadonlyPaths: null keeps them.
	var hostRaw map[string]json.RawMessage
	assert.NilError(t, json.Unmarshal(raw["HostConfig"], &hostRaw))
	assert.Equal(t, string(hostRaw["MaskedPaths"]), "[]")
	assert.Equal(t, string(hostRaw["ReadonlyPaths"]), "null")
}

func TestCreateContainerMinimalSpec(t *testing.T) {
	var raw map[string]json.RawMessage
	c := routedEngine(t, map[string]http.HandlerFunc{
		"POST /containers/create": func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(body, &raw)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"Id":"c1"}`))
		},
	})
	_, err := c.CreateContainer(context.Background(), ContainerSpec{Name: "x", Image: "busybox"})
	assert.NilError(t, err)
	// nil Entrypoint and Cmd keep the image's.
	assert.Equal(t, string(raw["Entrypoint"]), "null")
	assert.Equal(t, string(raw["Cmd"]), "null")
	var host container.HostConfig
	assert.NilError(t, json.Unmarshal(raw["HostConfig"], &host))
	assert.Assert(t, host.PidsLimit == nil)
	assert.Assert(t, host.MaskedPaths == nil && host.ReadonlyPaths == nil)
	assert.Assert(t, host.Binds == nil && host.PortBindings == nil)
	assert.Assert(t, host.LogConfig.Type == "" && host.LogConfig.Config == nil, "no LogConfig: the engine's default")
	assert.Assert(t, host.DeviceRequests == nil, "no CDI devices, no device request")
}

func TestBindsAndMounts(t *testing.T) {
	mounts := []Mount{
		{Source: "/cm", Target: "/etc/cm", ReadOnly: true, SELinuxRelabel: true},
		{Source: "/ro", Target: "/ro", ReadOnly: true, Propagation: "rslave"},
		{Source: "/rro", Target: "/rro", ReadOnly: true, RecursiveReadOnly: true},
		{Source: "/rw", Target: "/rw", Propagation: "rshared"},
	}
	nonRecursive := func(src, dst, prop string) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.Propagation(prop), ReadOnlyNonRecursive: true}}
	}
	recursive := mount.Mount{Type: mount.TypeBind, Source: "/rro", Target: "/rro", ReadOnly: true,
		BindOptions: &mount.BindOptions{ReadOnlyForceRecursive: true}}
	for _, tc := range []struct {
		name       string
		selinux    bool
		wantBinds  []string
		wantMounts []mount.Mount
	}{
		{
			name:       "without selinux every read-only mount uses the mount API",
			wantBinds:  []string{"/rw:/rw:rshared"},
			wantMounts: []mount.Mount{nonRecursive("/cm", "/etc/cm", ""), nonRecursive("/ro", "/ro", "rslave"), recursive},
		},
		{
			name:       "with selinux a relabelled mount keeps the bind syntax",
			selinux:    true,
			wantBinds:  []string{"/cm:/etc/cm:ro,Z", "/rw:/rw:rshared"},
			wantMounts: []mount.Mount{nonRecursive("/ro", "/ro", "rslave"), recursive},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			binds, ms := sdkBindsAndMounts(mounts, tc.selinux)
			assert.DeepEqual(t, binds, tc.wantBinds)
			assert.DeepEqual(t, ms, tc.wantMounts)
		})
	}
}

// TestImageMountsFromInspect: an inspected container's image volumes come from its host
// config as created (the image asked for), not from its mount points (a layer's path).
func TestImageMountsFromInspect(t *testing.T) {
	in := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "c1", HostConfig: &container.HostConfig{Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: "/srv", Target: "/srv", ReadOnly: true},
			{Type: mount.TypeImage, Source: "sha256:0123", Target: "/data", ReadOnly: true},
			{Type: mount.TypeImage, Source: "tools:1", Target: "/tools", ReadOnly: true, ImageOptions: &mount.ImageOptions{Subpath: "bin"}},
		}}},
		Mounts: []container.MountPoint{
			{Type: mount.TypeBind, Source: "/srv", Destination: "/srv"},
			{Type: mount.TypeImage, Source: "/var/lib/docker/overlay2/abc/merged", Destination: "/data"},
		},
	}
	d := detailsFromSDK(in)
	assert.DeepEqual(t, d.ImageMounts, []ImageMount{{Image: "sha256:0123", Target: "/data"}, {Image: "tools:1", Target: "/tools", SubPath: "bin"}})
	assert.DeepEqual(t, d.Mounts, []Mount{{Source: "/srv", Target: "/srv", ReadOnly: true}})
	assert.Assert(t, detailsFromSDK(container.InspectResponse{}).ImageMounts == nil)
}
