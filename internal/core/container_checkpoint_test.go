package core

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// fakeHost is a containerHost whose bundle specs and root filesystems are files
// of the test's.
type fakeHost struct {
	specs   map[string][]byte // by container ID
	rootDir string
	noCRIU  bool
}

func (h *fakeHost) spec(_ int, id string) ([]byte, error) {
	if s, ok := h.specs[id]; ok {
		return s, nil
	}
	return nil, os.ErrNotExist
}

func (h *fakeHost) root(int) string { return h.rootDir }

func (h *fakeHost) criu() (string, error) {
	if h.noCRIU {
		return "", errors.New(`exec: "criu": executable file not found in $PATH`)
	}
	return "/usr/sbin/criu", nil
}

// checkpointEnv is a runtime with a running container whose engine runs with
// experimental features, whose bundle spec and root filesystem are fakeHost's.
func checkpointEnv(t *testing.T) (*rtEnv, *fakeHost, string) {
	t.Helper()
	env := newRTEnv(t)
	info, err := env.engine.Info(context.Background())
	assert.NilError(t, err)
	info.Experimental = true
	env.engine.SetInfo(info)
	_, cid := runningContainer(t, env)
	host := &fakeHost{specs: map[string][]byte{
		cid: []byte(`{"ociVersion":"1.2.0","process":{"args":["sleep","1d"]},"annotations":{"io.kubernetes.cri.sandbox-id":"engine-set"}}`),
	}, rootDir: t.TempDir()}
	env.svc.host = host
	return env, host, cid
}

func checkpointTo(env *rtEnv, cid, loc string) error {
	_, err := env.svc.CheckpointContainer(context.Background(), &runtimeapi.CheckpointContainerRequest{ContainerId: cid, Location: loc})
	return err
}

// readArchive returns the archive's regular files by name, and its entry names.
func readArchive(t *testing.T, r io.Reader) (map[string][]byte, []string) {
	t.Helper()
	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, names
		}
		assert.NilError(t, err)
		names = append(names, hdr.Name)
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			assert.NilError(t, err)
			files[hdr.Name] = data
		}
	}
}

func TestCheckpointContainer(t *testing.T) {
	env, host, cid := checkpointEnv(t)
	assert.NilError(t, os.MkdirAll(filepath.Join(host.rootDir, "data", "sub"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(host.rootDir, "data", "sub", "new.txt"), []byte("written after start"), 0o644))
	assert.NilError(t, os.Symlink("sub/new.txt", filepath.Join(host.rootDir, "data", "link")))
	env.engine.SetChanges(cid,
		docker.FileChange{Path: "/data", Kind: docker.ChangeAdded},
		docker.FileChange{Path: "/data/sub", Kind: docker.ChangeAdded},
		docker.FileChange{Path: "/data/sub/new.txt", Kind: docker.ChangeAdded},
		docker.FileChange{Path: "/data/link", Kind: docker.ChangeAdded},
		docker.FileChange{Path: "/data/gone-already", Kind: docker.ChangeModified}, // removed since the list
		docker.FileChange{Path: "/etc/motd", Kind: docker.ChangeDeleted},
	)
	dir := t.TempDir()
	loc := filepath.Join(dir, "checkpoint-web_default-app-2026.tar")
	assert.NilError(t, checkpointTo(env, cid, loc))

	fi, err := os.Stat(loc)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(fi.Mode().Perm(), os.FileMode(0o600)), "a checkpoint holds the processes' memory")
	left, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Check(t, is.Len(left, 1), "the work directory is removed: %v", left)

	f, err := os.Open(loc)
	assert.NilError(t, err)
	defer f.Close()
	files, names := readArchive(t, f)
	assert.Check(t, is.Contains(names, "checkpoint/"))
	for _, img := range dockertest.CheckpointImages() {
		assert.Check(t, is.Equal(string(files["checkpoint/"+img]), img+" of "+cid))
	}

	var cfg checkpointConfig
	assert.NilError(t, json.Unmarshal(files[checkpointConfigFile], &cfg))
	c, err := env.engine.InspectContainer(context.Background(), cid)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(cfg.ID, cid))
	assert.Check(t, is.Equal(cfg.Name, "app"))
	image, _ := env.svc.statusImage(context.Background(), c)
	assert.Check(t, is.Equal(cfg.RootfsImageName, image))
	assert.Check(t, is.Equal(cfg.OCIRuntime, "runc"))
	assert.Check(t, is.Equal(cfg.RootfsImageRef, c.ImageID))
	assert.Check(t, !cfg.CheckpointedAt.IsZero())

	var spec struct {
		Process     map[string]any    `json:"process"`
		Annotations map[string]string `json:"annotations"`
	}
	assert.NilError(t, json.Unmarshal(files[checkpointSpecFile], &spec))
	assert.Check(t, is.DeepEqual(spec.Process["args"], []any{"sleep", "1d"}), "the bundle's spec as it is")
	assert.Check(t, is.Equal(spec.Annotations["io.kubernetes.cri.container-name"], "app"))
	assert.Check(t, is.Equal(spec.Annotations["io.kubernetes.cri.sandbox-name"], c.Labels[labelPodName]))
	assert.Check(t, is.Equal(spec.Annotations["io.kubernetes.cri.sandbox-namespace"], c.Labels[labelPodNamespace]))
	assert.Check(t, is.Equal(spec.Annotations["io.kubernetes.cri.image-name"], image))
	assert.Check(t, is.Equal(spec.Annotations["io.kubernetes.cri.sandbox-id"], "engine-set"), "the engine's annotations stay")

	var deleted []string
	assert.NilError(t, json.Unmarshal(files[checkpointDeletedFile], &deleted))
	assert.Check(t, is.DeepEqual(deleted, []string{"etc/motd"}))

	diff, diffNames := readArchive(t, bytes.NewReader(files[checkpointRootfsDiff]))
	assert.Check(t, is.DeepEqual(diffNames, []string{"data/", "data/sub/", "data/sub/new.txt", "data/link"}))
	assert.Check(t, is.Equal(string(diff["data/sub/new.txt"]), "written after start"))

	st, err := env.svc.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(st.GetStatus().GetState(), runtimeapi.ContainerState_CONTAINER_RUNNING), "the container goes on running")
}

// TestCheckpointContainerStaysInTheContainersRoot: a changed path whose directory
// the container swapped for a link out of its root is not read from the host.
func TestCheckpointContainerStaysInTheContainersRoot(t *testing.T) {
	env, host, cid := checkpointEnv(t)
	outside := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("the host's"), 0o600))
	assert.NilError(t, os.Symlink(outside, filepath.Join(host.rootDir, "data")))
	env.engine.SetChanges(cid, docker.FileChange{Path: "/data/secret", Kind: docker.ChangeAdded})
	dir := t.TempDir()
	err := checkpointTo(env, cid, filepath.Join(dir, "c.tar"))
	assert.Check(t, is.ErrorContains(err, "/data/secret"))
	assertNothingWritten(t, dir, "no archive")
}

// assertNothingWritten checks that a checkpoint left nothing in dir, neither an
// archive nor its work directory.
func assertNothingWritten(t *testing.T, dir, why string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Check(t, is.Len(left, 0), "%s: %v", why, left)
}

func TestCheckpointContainerRefusals(t *testing.T) {
	env, host, cid := checkpointEnv(t)
	dir := t.TempDir()
	loc := filepath.Join(dir, "c.tar")

	for _, bad := range []string{"", "relative/c.tar", filepath.Join(dir, "missing", "c.tar")} {
		err := checkpointTo(env, cid, bad)
		assert.Check(t, cerrdefs.IsInvalidArgument(err), "%q: %v", bad, err)
	}
	assert.Check(t, cerrdefs.IsNotFound(checkpointTo(env, "0123456789ab", loc)))

	// The container's bundle is not on this host (a remote engine).
	delete(host.specs, cid)
	err := checkpointTo(env, cid, loc)
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "runtime bundle is not readable on this host"))
	host.specs[cid] = []byte(`{}`)

	// An engine without experimental features.
	info, err := env.engine.Info(context.Background())
	assert.NilError(t, err)
	info.Experimental = false
	env.engine.SetInfo(info)
	env.svc.info = &infoCache{} // /info asked again
	err = checkpointTo(env, cid, loc)
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "experimental features"))
	assert.Check(t, is.Equal(env.engine.Calls("CheckpointContainer"), 0), "the engine is not asked")

	// A stopped container.
	info.Experimental = true
	env.engine.SetInfo(info)
	env.svc.info = &infoCache{}
	assert.NilError(t, stopContainer(env, cid, 0))
	assert.Check(t, cerrdefs.IsFailedPrecondition(checkpointTo(env, cid, loc)))

	assertNothingWritten(t, dir, "nothing written")
}

func TestCheckpointContainerEngineFailure(t *testing.T) {
	env, _, cid := checkpointEnv(t)
	dir := t.TempDir()
	env.engine.InjectError("CheckpointContainer", fmt.Errorf("criu is not installed where the engine runs containers: %w", cerrdefs.ErrFailedPrecondition))
	err := checkpointTo(env, cid, filepath.Join(dir, "c.tar"))
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "criu"))
	assertNothingWritten(t, dir, "no archive and no work directory left")
}

func TestCheckpointStatus(t *testing.T) {
	env, host, _ := checkpointEnv(t)
	status := func() map[string]any {
		t.Helper()
		resp, err := env.svc.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
		assert.NilError(t, err)
		var out map[string]any
		assert.NilError(t, json.Unmarshal([]byte(resp.GetInfo()["checkpoints"]), &out))
		return out
	}
	assert.Check(t, is.DeepEqual(status(), map[string]any{"available": true, "criu": "/usr/sbin/criu"}))

	host.noCRIU = true
	got := status()
	assert.Check(t, is.Equal(got["available"], false))
	assert.Check(t, strings.Contains(got["missing"].(string), "criu"), "%v", got)

	host.noCRIU = false
	info, err := env.engine.Info(context.Background())
	assert.NilError(t, err)
	info.Experimental = false
	env.engine.SetInfo(info)
	env.svc.info = &infoCache{}
	got = status()
	assert.Check(t, is.Equal(got["available"], false))
	assert.Check(t, strings.Contains(got["missing"].(string), "experimental"), "%v", got)
}

// TestProcHostSpec: the spec is read from the bundle beside the one the init
// process's parent (the shim) runs in: with one shim per pod, the pod's first
// container's.
func TestProcHostSpec(t *testing.T) {
	bundles := t.TempDir()
	for _, id := range []string{"sandbox", "app"} {
		assert.NilError(t, os.Mkdir(filepath.Join(bundles, id), 0o700))
		assert.NilError(t, os.WriteFile(filepath.Join(bundles, id, "config.json"), []byte(`{"id":"`+id+`"}`), 0o600))
	}
	shim := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	shim.Dir = filepath.Join(bundles, "sandbox")
	out, err := shim.StdoutPipe()
	assert.NilError(t, err)
	assert.NilError(t, shim.Start())
	t.Cleanup(func() {
		_ = shim.Process.Kill()
		_ = shim.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	assert.NilError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	for _, id := range []string{"sandbox", "app"} {
		spec, err := procHost{}.spec(pid, id)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(string(spec), `{"id":"`+id+`"}`))
	}
	_, err = procHost{}.spec(pid, "other")
	assert.Check(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

func TestParentPid(t *testing.T) {
	ppid, err := parentPid(os.Getpid())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(ppid, os.Getppid()))
	_, err = procHost{}.spec(0, "x")
	assert.Check(t, err != nil)
}
