//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
