//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// execProbe is an exec probe every second that fails at the first failure.
func execProbe(cmd ...string) map[string]any {
	return map[string]any{"exec": map[string]any{"command": cmd}, "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 5}
}

// probePasses finds the container's own process (another citool); probeFails finds nothing.
var (
	probePasses = execProbe("/citool", "pgrep", "^citool$")
	probeFails  = execProbe("/citool", "pgrep", "^no-such-process$")
)

// podStatusJSON is the part of a pod's status in kubelet's /pods (standalone kubelet gives static
// pods their status there) the tests read.
type podStatusJSON struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		Phase             string            `json:"phase"`
		ContainerStatuses []containerStatus `json:"containerStatuses"`
	} `json:"status"`
}

type containerStatus struct {
	Name         string `json:"name"`
	Ready        bool   `json:"ready"`
	RestartCount int    `json:"restartCount"`
	State        struct {
		Running *struct{} `json:"running"`
	} `json:"state"`
}

// kubeletStatuses returns kubelet's container statuses of static pod name, by container.
func (n *node) kubeletStatuses(t *testing.T, name string) map[string]containerStatus {
	t.Helper()
	code, body := n.get(t, "/pods")
	assert.Equal(t, code, 200, "%s", body)
	var list struct {
		Items []podStatusJSON `json:"items"`
	}
	assert.NilError(t, json.Unmarshal(body, &list))
	out := map[string]containerStatus{}
	for _, p := range list.Items {
		if p.Metadata.Name == podName(name) {
			for _, c := range p.Status.ContainerStatuses {
				out[c.Name] = c
			}
		}
	}
	return out
}

// TestNodeProbesAndRestarts: exec probes run through our binary's ExecSync (E); a container killed
// behind kubelet's back is restarted, and an init container runs to completion first (F); kubelet's
// /run runs a command in a container (H).
func TestNodeProbesAndRestarts(t *testing.T) {
	n := startNode(t, nodeOpts{})
	liveOK := counterContainer("live-ok")
	liveOK["livenessProbe"] = probePasses
	liveOK["readinessProbe"] = probePasses
	liveFail := counterContainer("live-fail")
	liveFail["livenessProbe"] = probeFails
	liveFail["readinessProbe"] = probePasses
	notReady := counterContainer("not-ready")
	notReady["readinessProbe"] = probeFails
	n.apply(t, staticPod("probes", liveOK, liveFail, notReady))

	victim := staticPod("victim", counterContainer("victim"))
	victim["spec"].(map[string]any)["initContainers"] = []map[string]any{{
		"name": "init", "image": pauseRef, "imagePullPolicy": "Never", "command": []string{"/citool", "ipcs"},
	}}
	n.apply(t, victim)

	n.waitRunning(t, "probes", "live-ok", "not-ready")
	v := n.waitRunning(t, "victim", "victim")

	t.Run("E/exec probes", func(t *testing.T) {
		seenReady := map[bool]bool{}
		var last map[string]containerStatus
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			last = n.kubeletStatuses(t, "probes")
			if lf, ok := last["live-fail"]; ok {
				seenReady[lf.Ready] = true
			}
			if last["live-fail"].RestartCount < 2 || !seenReady[true] || !seenReady[false] || !last["live-ok"].Ready {
				return poll.Continue("statuses %+v; live-fail ready values seen %v", last, seenReady)
			}
			return poll.Success()
		}, poll.WithTimeout(150*time.Second), poll.WithDelay(500*time.Millisecond))
		t.Logf("kubelet statuses: %+v", last)
		assert.Check(t, is.Equal(last["live-ok"].RestartCount, 0), "a passing liveness probe must never restart")
		assert.Check(t, last["live-ok"].Ready)
		assert.Check(t, !last["not-ready"].Ready, "a failing readiness probe must keep the container unready")
		assert.Check(t, is.Equal(last["not-ready"].RestartCount, 0), "readiness never restarts")
		// The restarts are new containers through our binary, attempts 1, 2, ...
		sb := n.sandboxes(t, "probes", true)
		assert.Assert(t, is.Len(sb, 1))
		attempts := 0
		for _, c := range n.containers(t, sb[0].GetId()) {
			if c.GetMetadata().GetName() == "live-fail" && int(c.GetMetadata().GetAttempt()) > attempts {
				attempts = int(c.GetMetadata().GetAttempt())
			}
		}
		assert.Check(t, attempts >= 2, "live-fail attempts through our CRI: %d", attempts)
	})

	t.Run("F/init container first", func(t *testing.T) {
		var init, main *runtimeapi.ContainerStatus
		for _, c := range n.containers(t, v.sandbox.GetId()) {
			st := containerStatusOf(t, n, c.GetId())
			switch c.GetMetadata().GetName() {
			case "init":
				init = st
			case "victim":
				main = st
			}
		}
		assert.Assert(t, init != nil && main != nil, "init %v main %v", init, main)
		assert.Check(t, is.Equal(init.GetState(), runtimeapi.ContainerState_CONTAINER_EXITED))
		assert.Check(t, is.Equal(init.GetExitCode(), int32(0)))
		assert.Check(t, init.GetFinishedAt() <= main.GetStartedAt(), "init finished at %d, main started at %d",
			init.GetFinishedAt(), main.GetStartedAt())
	})

	t.Run("F/killed behind kubelet's back", func(t *testing.T) {
		id := v.containers["victim"].GetId()
		docker(t, "kill", id)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			st := n.kubeletStatuses(t, "victim")["victim"]
			if st.RestartCount < 1 || st.State.Running == nil {
				return poll.Continue("victim: %+v", st)
			}
			return poll.Success()
		}, poll.WithTimeout(90*time.Second), poll.WithDelay(500*time.Millisecond))
		logDir := filepath.Join(n.dir, "pod-logs", fmt.Sprintf("%s_%s_%s", nodeNS, podName("victim"), v.sandbox.GetMetadata().GetUid()), "victim")
		waitLogLines(t, filepath.Join(logDir, "1.log"), 3)
		assert.Check(t, checkCountedLog(t, filepath.Join(logDir, "0.log")) > 0)
		assert.Check(t, checkCountedLog(t, filepath.Join(logDir, "1.log")) > 0)
		entries, _ := os.ReadDir(logDir)
		t.Logf("log files after the restart: %v", entries)
	})

	t.Run("H/run through kubelet", func(t *testing.T) {
		q := url.Values{"cmd": {"/citool pgrep ^citool$"}}
		code, body := n.do(t, "POST", fmt.Sprintf("/run/%s/%s/victim?%s", nodeNS, podName("victim"), q.Encode()))
		assert.Equal(t, code, 200, "%s", body)
		assert.Check(t, strings.TrimSpace(string(body)) != "", "pgrep printed no pid")
		t.Logf("/run output: %q", body)
	})
}

func containerStatusOf(t *testing.T, n *node, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := n.shim.rt.ContainerStatus(t.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.NilError(t, err)
	return resp.GetStatus()
}
