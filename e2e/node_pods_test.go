//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestNodePods runs a static pod under kubelet on our binary and checks what kubelet and an
// operator see (A), that restarts of kubelet and of our binary leave it untouched (D), and that
// removing its manifest removes it (C).
func TestNodePods(t *testing.T) {
	n := startNode(t, nodeOpts{})
	n.apply(t, staticPod("counter", counterContainer("counter")))
	p := n.waitRunning(t, "counter", "counter")
	uid := p.sandbox.GetMetadata().GetUid()
	ctrID := p.containers["counter"].GetId()

	t.Run("A/pod runs", func(t *testing.T) {
		ip := net.ParseIP(p.ip)
		assert.Check(t, ip != nil && podSubnet.Contains(ip), "pod IP %q not in %s", p.ip, podSubnet)
		assert.Check(t, is.DeepEqual(n.pn.leasedIPs(t), []string{p.ip}))
		assert.Check(t, is.Equal(p.sandbox.GetMetadata().GetNamespace(), nodeNS))

		// kubelet's log file, written by our binary in kubelet's pod log directory.
		logFile := n.podLog("counter", uid, "counter", 0)
		waitLogLines(t, logFile, 5)
		first := checkCountedLog(t, logFile)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if got := checkCountedLog(t, logFile); got <= first {
				return poll.Continue("log stays at %d lines", got)
			}
			return poll.Success()
		}, poll.WithTimeout(10*time.Second))
		b, err := os.ReadFile(logFile)
		assert.NilError(t, err)
		m := criLogLine.FindStringSubmatch(strings.SplitN(string(b), "\n", 2)[0])
		assert.Assert(t, m != nil, "not a CRI log line: %q", b)

		// The same lines through kubelet's API.
		code, body := n.get(t, fmt.Sprintf("/containerLogs/%s/%s/counter", nodeNS, podName("counter")))
		assert.Equal(t, code, 200, "%s", body)
		assert.Check(t, bytes.HasPrefix(body, []byte("line 1\nline 2\n")), "%.200s", body)
		t.Logf("/containerLogs: %d lines", bytes.Count(body, []byte("\n")))

		// kubelet's /pods lists the static pod.
		code, body = n.get(t, "/pods")
		assert.Equal(t, code, 200, "%s", body)
		assert.Check(t, bytes.Contains(body, []byte(`"name":"`+podName("counter")+`"`)), "%.400s", body)
	})

	t.Run("A/stats summary", func(t *testing.T) {
		var last string
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			code, body := n.get(t, "/stats/summary")
			if code != 200 {
				return poll.Continue("/stats/summary: %d %s", code, body)
			}
			var sum statsSummary
			assert.NilError(t, json.Unmarshal(body, &sum))
			for _, ps := range sum.Pods {
				if ps.PodRef.Name != podName("counter") {
					continue
				}
				last = fmt.Sprintf("pod cpu=%d mem=%d; containers %+v", ps.CPU.UsageCoreNanoSeconds, ps.Memory.WorkingSetBytes, ps.Containers)
				if ps.CPU.UsageCoreNanoSeconds == 0 || ps.Memory.WorkingSetBytes == 0 || len(ps.Containers) != 1 {
					return poll.Continue("pod stats not there yet: %s", last)
				}
				c := ps.Containers[0]
				if c.Name != "counter" || c.CPU.UsageCoreNanoSeconds == 0 || c.Memory.WorkingSetBytes == 0 || c.Logs.UsedBytes == 0 {
					return poll.Continue("container stats not there yet: %s", last)
				}
				return poll.Success()
			}
			return poll.Continue("pod not in /stats/summary yet: %.300s", body)
		}, poll.WithTimeout(90*time.Second), poll.WithDelay(2*time.Second))
		t.Logf("/stats/summary: %s", last)
	})

	// unchanged checks the pod kept its one sandbox and its one container, never restarted.
	unchanged := func(t *testing.T) {
		t.Helper()
		// Two of kubelet's sync periods (10s) for it to act on anything it would change.
		time.Sleep(12 * time.Second)
		sbs := n.sandboxes(t, "counter", false)
		assert.Assert(t, is.Len(sbs, 1))
		assert.Check(t, is.Equal(sbs[0].GetId(), p.sandbox.GetId()))
		assert.Check(t, is.Equal(sbs[0].GetState(), runtimeapi.PodSandboxState_SANDBOX_READY))
		cs := n.containers(t, p.sandbox.GetId())
		assert.Assert(t, is.Len(cs, 1))
		assert.Check(t, is.Equal(cs[0].GetId(), ctrID))
		assert.Check(t, is.Equal(cs[0].GetState(), runtimeapi.ContainerState_CONTAINER_RUNNING))
		assert.Check(t, is.Equal(cs[0].GetMetadata().GetAttempt(), uint32(0)))
		// kubelet sees it running: its container log keeps growing through kubelet's API.
		code, body := n.get(t, fmt.Sprintf("/containerLogs/%s/%s/counter?tailLines=1", nodeNS, podName("counter")))
		assert.Check(t, code == 200 && bytes.HasPrefix(body, []byte("line ")), "%d %s", code, body)
		code, body = n.get(t, "/runningpods/")
		assert.Check(t, code == 200 && bytes.Contains(body, []byte(podName("counter"))), "/runningpods/: %d %.300s", code, body)
	}

	t.Run("D/kubelet restart adopts the pod", func(t *testing.T) {
		n.stopKubelet(t)
		n.startKubelet(t)
		unchanged(t)
	})
	t.Run("D/our binary SIGTERM restart", func(t *testing.T) {
		n.restartShim(t, false)
		unchanged(t)
	})
	t.Run("D/our binary SIGKILL restart", func(t *testing.T) {
		n.restartShim(t, true)
		unchanged(t)
	})
	errs := n.kubeletLogLines(regexp.MustCompile(`^E\d{4} `))
	t.Logf("kubelet error lines so far (%d):\n%s", len(errs), strings.Join(errs, "\n"))

	t.Run("C/removing the manifest removes the pod", func(t *testing.T) {
		n.deleteManifest(t, "counter")
		start := time.Now()
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if sbs := n.sandboxes(t, "counter", false); len(sbs) > 0 {
				return poll.Continue("sandbox %s still listed (%s)", sbs[0].GetId(), sbs[0].GetState())
			}
			if out := docker(t, "ps", "-aq", "--filter", "label=io.kubernetes.pod.name="+podName("counter")); out != "" {
				return poll.Continue("engine containers left: %s", out)
			}
			if ips := n.pn.leasedIPs(t); len(ips) > 0 {
				return poll.Continue("IPs still leased: %v", ips)
			}
			return poll.Success()
		}, poll.WithTimeout(150*time.Second), poll.WithDelay(time.Second))
		t.Logf("pod gone %s after its manifest", time.Since(start).Round(time.Second))
	})
}

// statsSummary is the part of kubelet's /stats/summary the tests read.
type statsSummary struct {
	Pods []struct {
		PodRef struct {
			Name, Namespace string
		} `json:"podRef"`
		CPU        cpuStats    `json:"cpu"`
		Memory     memoryStats `json:"memory"`
		Containers []struct {
			Name   string      `json:"name"`
			CPU    cpuStats    `json:"cpu"`
			Memory memoryStats `json:"memory"`
			Logs   struct {
				UsedBytes uint64 `json:"usedBytes"`
			} `json:"logs"`
		} `json:"containers"`
	} `json:"pods"`
}

type cpuStats struct {
	UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
}

type memoryStats struct {
	WorkingSetBytes uint64 `json:"workingSetBytes"`
}

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
		PodIP             string            `json:"podIP"`
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

// kubeletPod returns kubelet's status of static pod name (zero when /pods does not list it).
func (n *node) kubeletPod(t *testing.T, name string) podStatusJSON {
	t.Helper()
	code, body := n.get(t, "/pods")
	assert.Equal(t, code, 200, "%s", body)
	var list struct {
		Items []podStatusJSON `json:"items"`
	}
	assert.NilError(t, json.Unmarshal(body, &list))
	for _, p := range list.Items {
		if p.Metadata.Name == podName(name) {
			return p
		}
	}
	return podStatusJSON{}
}

// kubeletStatuses returns kubelet's container statuses of static pod name, by container.
func (n *node) kubeletStatuses(t *testing.T, name string) map[string]containerStatus {
	t.Helper()
	out := map[string]containerStatus{}
	for _, c := range n.kubeletPod(t, name).Status.ContainerStatuses {
		out[c.Name] = c
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
		uid := v.sandbox.GetMetadata().GetUid()
		waitLogLines(t, n.podLog("victim", uid, "victim", 1), 3)
		assert.Check(t, checkCountedLog(t, n.podLog("victim", uid, "victim", 0)) > 0)
		assert.Check(t, checkCountedLog(t, n.podLog("victim", uid, "victim", 1)) > 0)
		entries, _ := os.ReadDir(filepath.Dir(n.podLog("victim", uid, "victim", 0)))
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
