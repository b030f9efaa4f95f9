//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestNodeEphemeralStorageLimit: a container that writes past its pod's
// ephemeral-storage limit into its root filesystem is caught by kubelet's eviction
// manager, which reads the container's writable layer from our ContainerStats
// (WritableLayer; upstream fills it, and without it kubelet never sees the writes).
// /stats/summary shows the container's rootfs with the bytes written. kubelet never
// evicts a static pod (it counts as critical, kubernetes #40573), so the proof is its
// decision: the "exceeds the total limit" eviction attempt in its log; the API-server
// pods of the node conformance suite are evicted for real.
func TestNodeEphemeralStorageLimit(t *testing.T) {
	n := startNode(t, nodeOpts{})
	c := counterContainer("writer")
	c["resources"] = map[string]any{"limits": map[string]any{"ephemeral-storage": "4Mi"}}
	n.apply(t, staticPod("storage", c))
	p := n.waitRunning(t, "storage", "writer")
	out, err := n.shim.rt.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{
		ContainerId: p.containers["writer"].GetId(), Cmd: []string{"/citool", "fill", "/var-filled", fmt.Sprint(12 << 20)}, Timeout: 60})
	assert.NilError(t, err)
	assert.Equal(t, out.GetExitCode(), int32(0), "%s", out.GetStderr())

	var rootfs uint64
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		code, body := n.get(t, "/stats/summary")
		if code != 200 {
			return poll.Continue("/stats/summary: %d", code)
		}
		var sum struct {
			Pods []struct {
				PodRef struct {
					Name string `json:"name"`
				} `json:"podRef"`
				Containers []struct {
					Name   string `json:"name"`
					Rootfs struct {
						UsedBytes  uint64 `json:"usedBytes"`
						InodesUsed uint64 `json:"inodesUsed"`
					} `json:"rootfs"`
				} `json:"containers"`
			} `json:"pods"`
		}
		assert.NilError(t, json.Unmarshal(body, &sum))
		for _, ps := range sum.Pods {
			for _, c := range ps.Containers {
				if ps.PodRef.Name == podName("storage") && c.Name == "writer" {
					rootfs = c.Rootfs.UsedBytes
				}
			}
		}
		if rootfs < 12<<20 {
			return poll.Continue("the writer's rootfs in /stats/summary: %d bytes", rootfs)
		}
		return poll.Success()
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(2*time.Second))
	t.Logf("/stats/summary: the writer's rootfs uses %d bytes", rootfs)

	// "Eviction manager: cannot evict a critical pod" pod="node-e2e/storage-dockpin-node"
	// (or, should kubelet evict static pods one day, its eviction of it).
	evict := regexp.MustCompile(`(?i)evict.*` + regexp.QuoteMeta(podName("storage")))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if len(n.kubeletLogLines(evict)) == 0 {
			return poll.Continue("kubelet has not acted on the pod's ephemeral storage yet")
		}
		return poll.Success()
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(2*time.Second))
	for _, l := range n.kubeletLogLines(evict) {
		t.Logf("kubelet: %s", l)
	}
}
