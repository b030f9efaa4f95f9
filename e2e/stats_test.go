//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerStatsFromCgroups: on the real engine, ContainerStats and
// ListContainerStats read a running container's cgroup (no fallback to the engine's
// stats is logged): its CPU time grows while it works, and its working set matches
// the one the engine's own stats give (usage less inactive file pages) within 4 MiB.
func TestContainerStatsFromCgroups(t *testing.T) {
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	pod := podConfig("stats")
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	cid := startContainer(t, s, podID, pod, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "counter"},
		Image:    &runtimeapi.ImageSpec{Image: pauseRef},
		Command:  []string{"/citool", "counter"},
		Envs:     []*runtimeapi.KeyValue{{Key: "INTERVAL", Value: []byte("1ms")}}, // busy enough to use CPU
		Linux:    &runtimeapi.LinuxContainerConfig{},
	})
	ctx := context.Background()
	first, err := s.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.NilError(t, err)
	cpu0 := first.GetStats().GetCpu().GetUsageCoreNanoSeconds().GetValue()
	mem := first.GetStats().GetMemory()
	assert.Check(t, mem.GetUsageBytes().GetValue() > 0)
	assert.Check(t, mem.GetWorkingSetBytes().GetValue() > 0 && mem.GetWorkingSetBytes().GetValue() <= mem.GetUsageBytes().GetValue())
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := s.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{Id: cid}})
		if err != nil {
			return poll.Error(err)
		}
		if got := resp.GetStats(); len(got) != 1 || got[0].GetCpu().GetUsageCoreNanoSeconds().GetValue() <= cpu0 {
			return poll.Continue("CPU not above %d yet: %v", cpu0, got)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(100*time.Millisecond))

	// Its usage in cores (usage_nano_cores, which kubelet's CRI stats mode takes as it is):
	// over a second of the busy counter, above zero.
	time.Sleep(1100 * time.Millisecond)
	busy, err := s.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.Check(t, busy.GetStats().GetCpu().GetUsageNanoCores().GetValue() > 0, "usage in cores: %v", busy.GetStats().GetCpu())

	engineWS := engineWorkingSet(t, cid)
	resp, err := s.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	assert.NilError(t, err)
	ours := resp.GetStats().GetMemory().GetWorkingSetBytes().GetValue()
	diff := int64(ours) - int64(engineWS)
	assert.Check(t, diff < 4<<20 && diff > -4<<20, "working set: ours %d, the engine's %d", ours, engineWS)
	t.Logf("working set: ours %d bytes, the engine's %d", ours, engineWS)
	assert.Check(t, !strings.Contains(s.log(t), "container stats from the engine"), "a fallback to the engine's stats was logged")
}

// engineWorkingSet asks the engine's API for container id's one-shot stats and
// computes its working set as kubelet does: usage less inactive file pages.
func engineWorkingSet(t *testing.T, id string) uint64 {
	t.Helper()
	sock := strings.TrimPrefix(env.dockerHost, "unix://")
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: 30 * time.Second}
	resp, err := client.Get("http://docker/containers/" + id + "/stats?stream=false&one-shot=true")
	assert.NilError(t, err)
	defer resp.Body.Close()
	var st struct {
		MemoryStats struct {
			Usage uint64            `json:"usage"`
			Stats map[string]uint64 `json:"stats"`
		} `json:"memory_stats"`
	}
	assert.NilError(t, json.NewDecoder(resp.Body).Decode(&st))
	inactive, ok := st.MemoryStats.Stats["total_inactive_file"] // cgroup v1
	if !ok {
		inactive = st.MemoryStats.Stats["inactive_file"]
	}
	return st.MemoryStats.Usage - min(st.MemoryStats.Usage, inactive)
}

// TestContainerWritableLayer: a container's stats report its writable layer, measured
// in the background (a request never walks it): after the container writes 3 MiB,
// WritableLayer grows by them within a measurement period, its timestamp is when it
// was measured, and its filesystem is the engine's data root.
func TestContainerWritableLayer(t *testing.T) {
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	pod := podConfig("layer")
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	cid := startContainer(t, s, podID, pod, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "writer"},
		Image:    &runtimeapi.ImageSpec{Image: pauseRef},
		Linux:    &runtimeapi.LinuxContainerConfig{},
	})
	ctx := context.Background()
	layer := func() *runtimeapi.FilesystemUsage {
		resp, err := s.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
		assert.NilError(t, err)
		return resp.GetStats().GetWritableLayer()
	}
	waitLayer := func(atLeast uint64) *runtimeapi.FilesystemUsage {
		t.Helper()
		var got *runtimeapi.FilesystemUsage
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if got = layer(); got.GetUsedBytes().GetValue() < atLeast || got.GetInodesUsed().GetValue() == 0 {
				return poll.Continue("writable layer %v, want at least %d bytes", got, atLeast)
			}
			return poll.Success()
		}, poll.WithTimeout(60*time.Second), poll.WithDelay(500*time.Millisecond))
		return got
	}
	before := waitLayer(0)
	root := strings.TrimSpace(docker(t, "info", "--format", "{{.DockerRootDir}}"))
	assert.Check(t, before.GetFsId().GetMountpoint() == root, "mountpoint %q, data root %q", before.GetFsId().GetMountpoint(), root)

	out, err := s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"/citool", "fill", "/filled", "3145728"}, Timeout: 30})
	assert.NilError(t, err)
	assert.Equal(t, out.GetExitCode(), int32(0), string(out.GetStderr()))
	written := time.Now()
	after := waitLayer(before.GetUsedBytes().GetValue() + 3<<20)
	assert.Check(t, after.GetInodesUsed().GetValue() > before.GetInodesUsed().GetValue(), "inodes %d then %d", before.GetInodesUsed().GetValue(), after.GetInodesUsed().GetValue())
	assert.Check(t, time.Unix(0, after.GetTimestamp()).After(written), "the measurement's own time")
	t.Logf("writable layer: %d bytes, %d inodes, then %d bytes, %d inodes", before.GetUsedBytes().GetValue(), before.GetInodesUsed().GetValue(),
		after.GetUsedBytes().GetValue(), after.GetInodesUsed().GetValue())
}
