//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// bridgePod runs a pod on the engine's own bridge (no CNI) through a fresh shim.
func bridgePod(t *testing.T, name string) (*shim, *runtimeapi.PodSandboxConfig, string) {
	t.Helper()
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	pod := podConfig(name)
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	return s, pod, podID
}

// containerProc reads file (under /proc/<pid>/) of the running container id's main process.
func containerProc(t *testing.T, id, file string) string {
	t.Helper()
	pid := docker(t, "inspect", "--format", "{{.State.Pid}}", id)
	b, err := os.ReadFile(filepath.Join("/proc", pid, file))
	assert.NilError(t, err)
	return string(b)
}

// TestCDIDevices writes a CDI spec with a fake device into the engine's CDI directory
// (hack/engine.sh): a container asking for it, by cdi_devices or by its name among the
// devices, gets the device's environment variable and mount; an unknown device fails
// CreateContainer with the engine's reason.
func TestCDIDevices(t *testing.T) {
	data := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(data, "marker"), []byte("cdi"), 0o644))
	kind := "dockpin.test/fake"
	spec := fmt.Sprintf(`{"cdiVersion": "0.6.0", "kind": %q, "devices": [
  {"name": "one", "containerEdits": {"env": ["DOCKPIN_CDI=one"]}},
  {"name": "two", "containerEdits": {"env": ["DOCKPIN_CDI=two"]}}],
 "containerEdits": {"mounts": [{"hostPath": %q, "containerPath": "/cdi-data", "options": ["ro", "bind"]}]}}`, kind, data)
	specFile := filepath.Join(env.stackDir, "cdi", "dockpin-fake.json")
	assert.NilError(t, os.MkdirAll(filepath.Dir(specFile), 0o755))
	assert.NilError(t, os.WriteFile(specFile, []byte(spec), 0o644))
	t.Cleanup(func() { _ = os.Remove(specFile) })

	s, pod, podID := bridgePod(t, "cdi")
	for _, tc := range []struct {
		name, want string
		mutate     func(*runtimeapi.ContainerConfig)
	}{
		{"cdi-devices", "one", func(c *runtimeapi.ContainerConfig) {
			c.CDIDevices = []*runtimeapi.CDIDevice{{Name: kind + "=one"}}
		}},
		{"devices", "two", func(c *runtimeapi.ContainerConfig) {
			c.Devices = []*runtimeapi.Device{{HostPath: kind + "=two"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := httpdContainer(tc.name, "8080", "")
			cfg.Command = []string{"/pause"}
			tc.mutate(cfg)
			id := startContainer(t, s, podID, pod, cfg)
			assert.Check(t, strings.Contains(containerProc(t, id, "environ"), "DOCKPIN_CDI="+tc.want+"\x00"))
			assert.Check(t, strings.Contains(containerProc(t, id, "mountinfo"), " /cdi-data ro,"), "no read-only /cdi-data mount")
		})
	}

	cfg := httpdContainer("unknown", "8080", "")
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: kind + "=nothere"}}
	_, err := s.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg, SandboxConfig: pod})
	assert.Assert(t, err != nil, "an unknown CDI device was accepted")
	st, _ := status.FromError(err)
	t.Logf("unknown CDI device: %v", err)
	assert.Check(t, st.Code() == codes.InvalidArgument || st.Code() == codes.NotFound || st.Code() == codes.FailedPrecondition, "code %v", st.Code())
	assert.Check(t, strings.Contains(st.Message(), kind+"=nothere"), st.Message())
}

// TestImageVolumes mounts an image (KEP-4639's image volume, as kubelet sends it: the
// image ID PullImage answered) read-only into a container, whole and by image_sub_path,
// through the engine's image mounts; a sub path the image lacks, and an image the engine
// does not have, fail CreateContainer.
func TestImageVolumes(t *testing.T) {
	s, pod, podID := bridgePod(t, "imgvol")
	id := importImage(t, "e2e/image-volume:1")
	cfg := httpdContainer("reader", "8080", "")
	cfg.Command = []string{"/pause"}
	cfg.Mounts = []*runtimeapi.Mount{
		{ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: id}, Readonly: true},
		{ContainerPath: "/conf", Image: &runtimeapi.ImageSpec{Image: id}, Readonly: true, ImageSubPath: "etc"},
	}
	cid := startContainer(t, s, podID, pod, cfg)
	pid := docker(t, "inspect", "--format", "{{.State.Pid}}", cid)
	whole, err := os.ReadFile(filepath.Join("/proc", pid, "root", "vol", "etc", "image-name"))
	assert.NilError(t, err)
	assert.Check(t, strings.HasPrefix(string(whole), "e2e/image-volume:1 "), string(whole))
	sub, err := os.ReadFile(filepath.Join("/proc", pid, "root", "conf", "image-name"))
	assert.NilError(t, err)
	assert.Equal(t, string(sub), string(whole))
	mounts := containerProc(t, cid, "mountinfo")
	for _, target := range []string{"/vol", "/conf"} {
		assert.Check(t, strings.Contains(mounts, " "+target+" ro,"), "%s is not a read-only mount", target)
	}

	ctx := context.Background()
	st, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cid})
	assert.NilError(t, err)
	got := map[string]string{}
	for _, m := range st.GetStatus().GetMounts() {
		if m.GetImage() != nil {
			assert.Check(t, m.GetReadonly() && m.GetImage().GetImageRef() == id, "%v", m)
			got[m.GetContainerPath()] = m.GetImageSubPath()
		}
	}
	assert.DeepEqual(t, got, map[string]string{"/vol": "", "/conf": "etc"})

	_, err = s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: pod, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "writable"}, Image: &runtimeapi.ImageSpec{Image: pauseRef},
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: id}}},
	}})
	assert.Equal(t, status.Code(err), codes.InvalidArgument, "an image volume not read-only: %v", err)
	for name, m := range map[string]*runtimeapi.Mount{
		"missing sub path": {ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: id}, Readonly: true, ImageSubPath: "no/such/dir"},
		"missing image":    {ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: "e2e/no-such-image:1"}, Readonly: true},
	} {
		bad := httpdContainer("bad-"+strings.ReplaceAll(name, " ", "-"), "8080", "")
		bad.Command = []string{"/pause"}
		bad.Mounts = []*runtimeapi.Mount{m}
		created, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: bad, SandboxConfig: pod})
		if err == nil { // the engine may find a missing sub path only when it mounts
			_, err = s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.GetContainerId()})
		}
		assert.Check(t, err != nil, "%s: accepted", name)
		t.Logf("%s: %v (%v)", name, err, status.Code(err))
		assert.Check(t, status.Code(err) != codes.Unknown, "%s: %v", name, err)
	}
}

// swapLimit reads the running container id's swap limit from its cgroup, as swap alone
// ("max" when unlimited): memory.swap.max on cgroup v2, memory.memsw.limit_in_bytes
// (memory+swap) less memory.limit_in_bytes on v1.
func swapLimit(t *testing.T, id string) string {
	t.Helper()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		assert.NilError(t, err)
		return strings.TrimSpace(string(b))
	}
	for _, line := range strings.Split(containerProc(t, id, "cgroup"), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" && cgroupV2() {
			return read(filepath.Join("/sys/fs/cgroup", parts[2], "memory.swap.max"))
		}
		if parts[1] == "memory" {
			dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			total, err := strconv.ParseInt(read(filepath.Join(dir, "memory.memsw.limit_in_bytes")), 10, 64)
			assert.NilError(t, err)
			mem, err := strconv.ParseInt(read(filepath.Join(dir, "memory.limit_in_bytes")), 10, 64)
			assert.NilError(t, err)
			if total >= 1<<62 { // the kernel's "no limit", rounded to pages
				return "max"
			}
			return strconv.FormatInt(total-mem, 10)
		}
	}
	t.Fatalf("no memory cgroup for container %s", id)
	return ""
}

func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// TestMemorySwapLimits sets the CRI's swap settings as kubelet does (LimitedSwap and NoSwap
// through unified["memory.swap.max"] on cgroup v2, memory_swap_limit_in_bytes as
// memory+swap on v1) at creation and through UpdateContainerResources, and reads them
// back from the container's cgroup on this host.
func TestMemorySwapLimits(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil && !cgroupV2() {
		t.Skip("no swap accounting on this cgroup v1 host")
	}
	s, pod, podID := bridgePod(t, "swap")
	ctx := context.Background()
	const mem = 64 << 20
	cfg := httpdContainer("swap", "8080", "")
	cfg.Command = []string{"/pause"}
	cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": strconv.Itoa(32 << 20)},
	}
	id := startContainer(t, s, podID, pod, cfg)
	assert.Equal(t, swapLimit(t, id), strconv.Itoa(32<<20))
	unlimited := httpdContainer("unlimited", "8080", "")
	unlimited.Command = []string{"/pause"}
	unlimited.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "max"}}
	assert.Equal(t, swapLimit(t, startContainer(t, s, podID, pod, unlimited)), "max")

	for _, tc := range []struct {
		name string
		r    *runtimeapi.LinuxContainerResources
		want string
	}{
		{"memory+swap", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, MemorySwapLimitInBytes: mem + 16<<20}, strconv.Itoa(16 << 20)},
		{"no swap", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "0"}}, "0"},
	} {
		_, err := s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: tc.r})
		assert.NilError(t, err, tc.name)
		assert.Check(t, swapLimit(t, id) == tc.want, "%s: swap %s, want %s", tc.name, swapLimit(t, id), tc.want)
	}

	_, err := s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "1G"},
	}})
	assert.Equal(t, status.Code(err), codes.InvalidArgument, "%v", err)
	assert.ErrorContains(t, err, "memory.swap.max")
	// The engine applies unlimited swap only at creation.
	_, err = s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: mem, Unified: map[string]string{"memory.swap.max": "max"},
	}})
	assert.Equal(t, status.Code(err), codes.Unimplemented, "%v", err)
	assert.Equal(t, swapLimit(t, id), "0", "a refused update changes nothing")
}

// TestImageFsInfoContainerFilesystem: ImageFsInfo reports the containers' writable
// layers apart from the images (container_filesystems, for kubelet's split image
// filesystem), on the engine's data root, with the inodes in use there; a file written
// into a container's writable layer shows in it.
func TestImageFsInfoContainerFilesystem(t *testing.T) {
	pauseImage(t)
	// Straight from the engine: the image cache recomputes the usage only every minute.
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"), "--image-cache=false")
	pod := podConfig("fsinfo")
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	ctx := context.Background()
	info := func() *runtimeapi.ImageFsInfoResponse {
		t.Helper()
		fs, err := s.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		assert.NilError(t, err)
		assert.Assert(t, len(fs.GetImageFilesystems()) == 1 && len(fs.GetContainerFilesystems()) == 1)
		return fs
	}
	before := info()
	root := docker(t, "info", "--format", "{{.DockerRootDir}}")
	for _, fs := range append(before.GetImageFilesystems(), before.GetContainerFilesystems()...) {
		assert.Equal(t, fs.GetFsId().GetMountpoint(), root)
		assert.Check(t, fs.GetInodesUsed().GetValue() > 0, "inodes in use on %s not reported", root)
	}

	cfg := httpdContainer("writer", "8080", "")
	cfg.Command = []string{"/pause"}
	id := startContainer(t, s, podID, pod, cfg)
	blob := filepath.Join(t.TempDir(), "blob")
	assert.NilError(t, os.WriteFile(blob, bytes.Repeat([]byte("x"), 4<<20), 0o644))
	docker(t, "cp", blob, id+":/blob")
	after := info().GetContainerFilesystems()[0].GetUsedBytes().GetValue()
	grown := after - before.GetContainerFilesystems()[0].GetUsedBytes().GetValue()
	assert.Check(t, after > before.GetContainerFilesystems()[0].GetUsedBytes().GetValue() && grown >= 4<<20,
		"container filesystem went from %d to %d bytes after a 4 MiB write", before.GetContainerFilesystems()[0].GetUsedBytes().GetValue(), after)
}

// TestUpdatePodSandboxResources: kubelet's in-place pod resize notice succeeds on a
// running pod (the pod cgroup is kubelet's; the containers are resized one by one), is
// NotFound for a pod that is not there and InvalidArgument for a swap setting the engine
// could not take.
func TestUpdatePodSandboxResources(t *testing.T) {
	s, pod, podID := bridgePod(t, "resize")
	cfg := httpdContainer("app", "8080", "")
	cfg.Command = []string{"/pause"}
	id := startContainer(t, s, podID, pod, cfg)
	ctx := context.Background()
	resized := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 128 << 20}
	_, err := s.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: podID, Resources: resized})
	assert.NilError(t, err)
	_, err = s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: resized})
	assert.NilError(t, err)
	st, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.NilError(t, err)
	assert.Equal(t, st.GetStatus().GetResources().GetLinux().GetMemoryLimitInBytes(), int64(128<<20))
	assert.Equal(t, podStatus(t, s, podID).GetState(), runtimeapi.PodSandboxState_SANDBOX_READY)

	_, err = s.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "0123456789abcdef", Resources: resized})
	assert.Equal(t, status.Code(err), codes.NotFound, "%v", err)
	_, err = s.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: podID, Resources: &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: 128 << 20, Unified: map[string]string{"memory.swap.max": "lots"},
	}})
	assert.Equal(t, status.Code(err), codes.InvalidArgument, "%v", err)
}
