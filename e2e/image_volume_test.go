//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
