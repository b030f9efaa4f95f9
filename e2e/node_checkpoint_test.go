//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestNodeCheckpointContainer: kubelet's checkpoint endpoint (KEP-2008,
// ContainerCheckpoint, on by default) asks our CheckpointContainer for an archive of a
// running container, which checkpointctl reads back: the container and pod names,
// CRIU's process tree with the container's process, and the file written into its
// writable layer. The container goes on running.
func TestNodeCheckpointContainer(t *testing.T) {
	tools, err := hackOutput("install-tools.sh", "checkpointctl")
	assert.NilError(t, err)
	checkpointctl := filepath.Join(tools, "checkpointctl")

	n := startNode(t, nodeOpts{})
	var st struct {
		Available bool   `json:"available"`
		Missing   string `json:"missing"`
	}
	n.shim.statusPart(t, "checkpoints", &st)
	assert.Assert(t, st.Available, "verbose Status says checkpoints are not available: %s", st.Missing)

	n.apply(t, staticPod("ckpt", counterContainer("app")))
	p := n.waitRunning(t, "ckpt", "app")
	id := p.containers["app"].GetId()
	marker := filepath.Join(t.TempDir(), "marker.txt")
	assert.NilError(t, os.WriteFile(marker, []byte("in the writable layer"), 0o644))
	docker(t, "cp", marker, id+":/marker.txt")

	code, body := n.do(t, http.MethodPost, "/checkpoint/"+nodeNS+"/"+podName("ckpt")+"/app?timeout=120")
	assert.Assert(t, is.Equal(code, http.StatusOK), "kubelet's checkpoint: %s\nour log: %s", body, n.shim.log(t))
	var resp struct {
		Items []string `json:"items"`
	}
	assert.NilError(t, json.Unmarshal(body, &resp), "%s", body)
	assert.Assert(t, is.Len(resp.Items, 1), "%s", body)
	archive := resp.Items[0]
	assert.Check(t, strings.HasPrefix(archive, n.dir+"/") && filepath.Base(filepath.Dir(archive)) == "checkpoints", "kubelet's checkpoints directory: %s", archive)
	fi, err := os.Stat(archive)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(fi.Mode().Perm(), os.FileMode(0o600)))
	t.Logf("checkpoint of %s: %s, %d bytes", id[:12], archive, fi.Size())

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(checkpointctl, args...).CombinedOutput()
		assert.NilError(t, err, "checkpointctl %s: %s", strings.Join(args, " "), out)
		t.Logf("checkpointctl %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	show := run("show", archive)
	for _, want := range []string{"app", id[:12], pauseRef, "ROOT FS DIFF SIZE"} {
		assert.Check(t, is.Contains(show, want))
	}
	var inspect []struct {
		Name        string `json:"container_name"`
		ID          string `json:"id"`
		ProcessTree struct {
			Command string `json:"command"`
			State   string `json:"task_state"`
		} `json:"process_tree"`
		Size struct {
			Pages int64 `json:"memory_pages_size"`
		} `json:"checkpoint_size"`
	}
	raw := run("inspect", "--ps-tree", "--format", "json", archive)
	assert.NilError(t, json.Unmarshal([]byte(raw), &inspect))
	assert.Assert(t, is.Len(inspect, 1))
	assert.Check(t, is.Equal(inspect[0].Name, "app"))
	assert.Check(t, is.Equal(inspect[0].ID, id))
	assert.Check(t, is.Equal(inspect[0].ProcessTree.Command, "citool"), "CRIU's process tree holds the container's process")
	assert.Check(t, inspect[0].Size.Pages > 0, "CRIU dumped memory pages")

	diff := rootfsDiffNames(t, archive)
	assert.Check(t, is.Contains(diff, "marker.txt"), "rootfs-diff.tar: %v", diff)

	time.Sleep(time.Second) // the counter goes on after the dump
	after := n.waitRunning(t, "ckpt", "app")
	assert.Check(t, is.Equal(after.containers["app"].GetId(), id), "the same container runs on")
	assert.Check(t, is.Equal(n.kubeletStatuses(t, "ckpt")["app"].RestartCount, 0))
}

// rootfsDiffNames lists the entries of the rootfs-diff.tar inside a checkpoint archive.
func rootfsDiffNames(t *testing.T, archive string) []string {
	t.Helper()
	f, err := os.Open(archive)
	assert.NilError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no rootfs-diff.tar", archive)
		}
		assert.NilError(t, err)
		if hdr.Name != "rootfs-diff.tar" {
			continue
		}
		raw, err := io.ReadAll(tr)
		assert.NilError(t, err)
		var names []string
		inner := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := inner.Next()
			if errors.Is(err, io.EOF) {
				return names
			}
			assert.NilError(t, err)
			names = append(names, h.Name)
		}
	}
}
