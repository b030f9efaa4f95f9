//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pauseContainer is a container of the pause image that only waits, in a PID namespace
// of its own (kubelet's default: the pause container's death does not kill it).
func pauseContainer(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: pauseRef},
		Command:  []string{"/pause"},
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
		}},
	}
}

// shimOf returns the PID of the containerd shim whose child is container id's process.
func shimOf(t *testing.T, id string) int {
	t.Helper()
	for line := range strings.SplitSeq(containerProc(t, id, "status"), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, err := strconv.Atoi(strings.TrimSpace(v))
			assert.NilError(t, err)
			cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid))
			assert.NilError(t, err)
			assert.Check(t, is.Contains(string(cmd), "containerd-shim-runc-v2"), "parent of container %s", id)
			return ppid
		}
	}
	t.Fatalf("container %s: no PPid in its /proc status", id)
	return 0
}

// waitGone waits until process pid has exited.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			return poll.Continue("%s (pid %d) still running", what, pid)
		}
		return poll.Success()
	}, poll.WithTimeout(20*time.Second), poll.WithDelay(50*time.Millisecond))
}

// TestPodSharesOneShim checks that a pod's containers run under its pause container's
// containerd shim, as under containerd's CRI (one shim process per pod, not per
// container), through the lifecycles that change a pod's tasks: a container replaced,
// the pause container killed first, the pod stopped and removed. The shim exits with
// the pod's last task.
func TestPodSharesOneShim(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	ctx := context.Background()

	pod := podConfig("shim")
	podID := runPod(t, s, pod)
	shim := shimOf(t, podID)
	a := startContainer(t, s, podID, pod, pauseContainer("a"))
	b := startContainer(t, s, podID, pod, pauseContainer("b"))
	assert.Equal(t, shimOf(t, a), shim, "container a runs under the pod's shim")
	assert.Equal(t, shimOf(t, b), shim, "container b runs under the pod's shim")
	assert.Equal(t, docker(t, "inspect", "--format", `{{index .HostConfig.Annotations "io.kubernetes.cri.sandbox-id"}}`, a), podID)

	// A container replaced (kubelet's restart of a container) joins the same shim.
	_, err := s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: a, Timeout: 0})
	assert.NilError(t, err)
	_, err = s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: a})
	assert.NilError(t, err)
	a2 := startContainer(t, s, podID, pod, pauseContainer("a2"))
	assert.Equal(t, shimOf(t, a2), shim, "a new container runs under the pod's shim")

	// The pause container dies first (its task deleted while others run in the shim):
	// the containers keep running, and the pod still stops and goes away.
	docker(t, "kill", podID)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if st := docker(t, "inspect", "--format", "{{.State.Status}}", podID); st != "exited" {
			return poll.Continue("pause container %s", st)
		}
		return poll.Success()
	}, poll.WithTimeout(20*time.Second), poll.WithDelay(50*time.Millisecond))
	assert.Equal(t, docker(t, "inspect", "--format", "{{.State.Status}}", b), "running")
	assert.Equal(t, shimOf(t, b), shim)
	stopAndRemovePod(t, s, podID)
	for _, id := range []string{podID, b, a2} {
		_, err := dockerErr(nil, "inspect", id)
		assert.Check(t, err != nil, "container %s left", id)
	}
	waitGone(t, shim, "the pod's shim")

	// A pod stopped and removed in the usual order: its shim exits too.
	pod2 := podConfig("shim2")
	pod2ID := runPod(t, s, pod2)
	shim2 := shimOf(t, pod2ID)
	c := startContainer(t, s, pod2ID, pod2, pauseContainer("c"))
	assert.Equal(t, shimOf(t, c), shim2)
	stopAndRemovePod(t, s, pod2ID)
	waitGone(t, shim2, "the second pod's shim")
}
