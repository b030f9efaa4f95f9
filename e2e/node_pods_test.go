//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
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
		logFile := filepath.Join(n.dir, "pod-logs", fmt.Sprintf("%s_%s_%s", nodeNS, podName("counter"), uid), "counter", "0.log")
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
