//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
func (n *node) kubeletPod(t testing.TB, name string) podStatusJSON {
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
func (n *node) kubeletStatuses(t testing.TB, name string) map[string]containerStatus {
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

func containerStatusOf(t testing.TB, n *node, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := n.shim.rt.ContainerStatus(t.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.NilError(t, err)
	return resp.GetStatus()
}

// bridgeGateway is the host's address on the CNI bridge (hack/cni.sh: isGateway).
const bridgeGateway = "10.88.0.1"

// freePort is a TCP port nothing on the host listens on now (the kernel's pick).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	assert.NilError(t, l.Close())
	return port
}

// hasLocalAddr tells whether one of the node's interfaces has address ip (traffic to it stays here).
func hasLocalAddr(t testing.TB, ip string) bool {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	assert.NilError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(net.ParseIP(ip)) {
			return true
		}
	}
	return false
}

// refused checks that nothing answers on addr yet (so that an answer later is the pod's).
func refused(t testing.TB, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	assert.Assert(t, err != nil, "something already listens on %s", addr)
}

// httpdOn runs citool's httpd on port, declared as a container port with hostPort.
func httpdOn(name string, port, hostPort int) map[string]any {
	return map[string]any{
		"name": name, "image": pauseRef, "imagePullPolicy": "Never",
		"command": []string{"/citool", "httpd"},
		"env":     []map[string]string{{"name": "PORT", "value": strconv.Itoa(port)}},
		"ports":   []map[string]any{{"containerPort": port, "hostPort": hostPort, "protocol": "TCP"}},
	}
}

// netns is the network namespace (its /proc link, "net:[inode]") of a process.
func netns(t testing.TB, pid string) string {
	t.Helper()
	link, err := os.Readlink("/proc/" + pid + "/ns/net")
	assert.NilError(t, err)
	return link
}

// containerNetns is the network namespace of an engine container's process.
func containerNetns(t testing.TB, id string) string {
	t.Helper()
	return netns(t, docker(t, "inspect", "--format", "{{.State.Pid}}", id))
}

// TestNodeHostNetwork (G): a hostNetwork pod runs in the node's network namespace, and a CNI pod's
// hostPort reaches it from the node's loopback and bridge addresses (the portmap plugin).
func TestNodeHostNetwork(t *testing.T) {
	n := startNode(t, nodeOpts{})
	hostPort, podHostPort := freePort(t), freePort(t)
	for podHostPort == hostPort {
		podHostPort = freePort(t)
	}
	// Nothing on the node listens on either port yet (on loopback only: the bridge may not exist
	// before the first pod, and its address would then be routed off this machine).
	refused(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)))
	refused(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(podHostPort)))
	hostNet := staticPod("hostnet", httpdOn("httpd", hostPort, hostPort))
	hostNet["spec"].(map[string]any)["hostNetwork"] = true
	n.apply(t, hostNet)
	n.apply(t, staticPod("hostport", httpdOn("httpd", 8080, podHostPort)))
	h := n.waitRunning(t, "hostnet", "httpd")
	p := n.waitRunning(t, "hostport", "httpd")
	hostNS := netns(t, "self")

	t.Run("G/hostNetwork pod in the node's namespace", func(t *testing.T) {
		st := podStatus(t, n.shim, h.sandbox.GetId())
		assert.Check(t, is.Equal(st.GetLinux().GetNamespaces().GetOptions().GetNetwork(), runtimeapi.NamespaceMode_NODE))
		assert.Check(t, is.Equal(h.ip, ""), "a host-network sandbox has no IP of its own (kubelet uses the node's)")
		assert.Check(t, is.Equal(docker(t, "inspect", "--format", "{{.HostConfig.NetworkMode}}", h.sandbox.GetId()), "host"))
		assert.Check(t, is.Equal(containerNetns(t, h.sandbox.GetId()), hostNS), "the sandbox's network namespace")
		assert.Check(t, is.Equal(containerNetns(t, h.containers["httpd"].GetId()), hostNS), "the container's network namespace")
		// Loopback is per namespace: only a process in the node's answers on the node's 127.0.0.1.
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort))
		// No pod address was leased for it: only the CNI pod holds one.
		assert.Check(t, is.DeepEqual(n.pn.leasedIPs(t), []string{p.ip}))
	})

	t.Run("G/hostPort on the node's addresses", func(t *testing.T) {
		ip := net.ParseIP(p.ip)
		assert.Assert(t, ip != nil && podSubnet.Contains(ip), "pod IP %q not in %s", p.ip, podSubnet)
		assert.Check(t, is.Equal(podStatus(t, n.shim, p.sandbox.GetId()).GetLinux().GetNamespaces().GetOptions().GetNetwork(),
			runtimeapi.NamespaceMode_POD))
		assert.Check(t, containerNetns(t, p.containers["httpd"].GetId()) != hostNS, "a CNI pod has a network namespace of its own")
		waitHTTP(t, "http://"+net.JoinHostPort(p.ip, "8080")+"/")
		// Nothing listened on the port before the pod: the portmap plugin's DNAT leads it to the pod.
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", podHostPort))
		assert.Assert(t, hasLocalAddr(t, bridgeGateway), "the CNI bridge's address %s is not the node's", bridgeGateway)
		waitHTTP(t, fmt.Sprintf("http://%s:%d/", bridgeGateway, podHostPort))
	})
}

// swapContainers are the containers of every pod of TestNodeSwap: a counter whose log must keep
// flowing, and one container per swap that the test kills right after that swap. kubelet reads a
// sandbox's status again only when something in its pod changed (its PLEG relists sandboxes and
// containers, not their status): the kill makes it inspect the pod through the binary that took
// over, and it then restarts the container in the pod's sandbox, unless it judged the sandbox
// broken (no IP, not ready, another network mode) and replaced the whole pod.
var swapContainers = []string{"counter", "poke-1", "poke-2"}

func swapPod(name string) map[string]any {
	var cs []map[string]any
	for _, c := range swapContainers {
		cs = append(cs, counterContainer(c))
	}
	return staticPod(name, cs...)
}

// swapSnapshot is what kubelet and the running binary report of a pod, compared across a swap.
type swapSnapshot struct {
	name     string
	sandbox  string // the one ready sandbox's id
	uid      string
	ip       string            // PodSandboxStatus's IP, the same in kubelet's status
	ids      map[string]string // running container ids, by name
	restarts map[string]int    // kubelet's restart counts, by container
}

// swapSnapshot waits until static pod name runs every swap container, in our CRI and in kubelet's
// status (with the sandbox's IP), and returns what both report.
func (n *node) swapSnapshot(t testing.TB, name string) swapSnapshot {
	t.Helper()
	p := n.waitRunning(t, name, swapContainers...)
	s := swapSnapshot{name: name, sandbox: p.sandbox.GetId(), uid: p.sandbox.GetMetadata().GetUid(), ip: p.ip,
		ids: map[string]string{}, restarts: map[string]int{}}
	for c, ctr := range p.containers {
		s.ids[c] = ctr.GetId()
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		kp := n.kubeletPod(t, name)
		if kp.Status.PodIP != s.ip {
			return poll.Continue("kubelet's pod IP %q, the sandbox's %q", kp.Status.PodIP, s.ip)
		}
		for _, c := range kp.Status.ContainerStatuses {
			if c.State.Running == nil {
				return poll.Continue("kubelet: container %s of %s not running: %+v", c.Name, name, c)
			}
			s.restarts[c.Name] = c.RestartCount
		}
		if len(s.restarts) != len(swapContainers) {
			return poll.Continue("kubelet: %d container statuses of %s", len(s.restarts), name)
		}
		return poll.Success()
	}, poll.WithTimeout(60*time.Second), poll.WithDelay(500*time.Millisecond))
	return s
}

// countedNumber is a counter line in either log format: the CRI's (ours) or the engine's JSON
// (upstream links kubelet's path to the engine's json-file log).
var countedNumber = regexp.MustCompile(`line (\d+)`)

// lastCounted is the number of the last counter line in the log at path (0: none yet).
func lastCounted(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	assert.NilError(t, err)
	ms := countedNumber.FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		return 0
	}
	n, err := strconv.Atoi(string(ms[len(ms)-1][1]))
	assert.NilError(t, err)
	return n
}

// waitCountedPast waits until the last counter line in the log at path is past line after.
func waitCountedPast(t testing.TB, path string, after int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if got := lastCounted(t, path); got <= after {
			return poll.Continue("%s: last line %d, waiting for one past %d", path, got, after)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(200*time.Millisecond))
}

// isLink tells whether kubelet's log path is a symbolic link (upstream's, to the engine's log).
func isLink(t testing.TB, path string) bool {
	t.Helper()
	fi, err := os.Lstat(path)
	assert.NilError(t, err)
	return fi.Mode()&os.ModeSymlink != 0
}

// klogProblem is a klog error or warning line.
var klogProblem = regexp.MustCompile(`^[EW]\d{4} `)

// swapTo replaces the node's binary by binary under kubelet and the running pods, kills poke in
// each pod and checks that kubelet, inspecting the pods through binary, kept them: the same
// sandbox (the only one), IP and container ids, poke restarted in that sandbox, every restart
// count carried over. The counters' logs keep growing when existingLogs; the restarted poke's
// does in any case. It returns the pods as they are then.
func (n *node) swapTo(t testing.TB, binary, poke string, existingLogs bool, pods []swapSnapshot) []swapSnapshot {
	t.Helper()
	kubeletLogAt, before := len(n.kubeletLog()), map[string]int{}
	for _, p := range pods {
		before[p.name] = lastCounted(t, n.podLog(p.name, p.uid, "counter", 0))
	}
	n.replaceShim(t, binary, false)
	for _, p := range pods {
		docker(t, "kill", p.ids[poke])
	}
	var out []swapSnapshot
	for _, p := range pods {
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if st := n.kubeletStatuses(t, p.name)[poke]; st.RestartCount <= p.restarts[poke] || st.State.Running == nil {
				return poll.Continue("kubelet has not restarted %s of %s: %+v", poke, p.name, st)
			}
			return poll.Success()
		}, poll.WithTimeout(60*time.Second), poll.WithDelay(500*time.Millisecond))
		q := n.swapSnapshot(t, p.name)
		var ids []string
		for _, sb := range n.sandboxes(t, p.name, false) {
			ids = append(ids, sb.GetId()+" "+sb.GetState().String())
		}
		assert.Check(t, is.DeepEqual(ids, []string{p.sandbox + " SANDBOX_READY"}), "sandboxes of %s: kubelet replaced it", p.name)
		assert.Check(t, is.Equal(q.ip, p.ip), "IP of %s", p.name)
		for _, c := range swapContainers {
			want := p.restarts[c]
			if c == poke {
				want++
				assert.Check(t, q.ids[c] != p.ids[c], "%s of %s was not restarted", c, p.name)
			} else {
				assert.Check(t, is.Equal(q.ids[c], p.ids[c]), "container %s of %s", c, p.name)
			}
			assert.Check(t, is.Equal(q.restarts[c], want), "kubelet's restart count of %s in %s", c, p.name)
		}
		waitCountedPast(t, n.podLog(p.name, p.uid, poke, q.restarts[poke]), 2)
		counter := n.podLog(p.name, p.uid, "counter", 0)
		if existingLogs {
			waitCountedPast(t, counter, before[p.name]+5)
		} else {
			t.Logf("%s: counter log at line %d, %d before the swap", p.name, lastCounted(t, counter), before[p.name])
		}
		out = append(out, q)
	}
	var problems []string
	for _, l := range strings.Split(n.kubeletLog()[kubeletLogAt:], "\n") {
		if klogProblem.MatchString(l) {
			problems = append(problems, l)
		}
	}
	t.Logf("kubelet's errors and warnings from the swap to %s to now (%d):\n%s", binary, len(problems), strings.Join(problems, "\n"))
	return out
}

// startSwapPod starts a pod after a swap: it runs, with an IP no other pod has, and logs.
func (n *node) startSwapPod(t testing.TB, name string, others []swapSnapshot) swapSnapshot {
	t.Helper()
	n.apply(t, swapPod(name))
	p := n.swapSnapshot(t, name)
	assert.Check(t, podSubnet.Contains(net.ParseIP(p.ip)), "IP %q of %s", p.ip, name)
	ips := []string{p.ip}
	for _, o := range others {
		assert.Check(t, p.ip != o.ip, "%s got the IP of %s", name, o.name)
		ips = append(ips, o.ip)
	}
	slices.Sort(ips)
	leased := n.pn.leasedIPs(t)
	slices.Sort(leased)
	assert.Check(t, is.DeepEqual(leased, ips), "host-local leases")
	waitCountedPast(t, n.podLog(name, p.uid, "counter", 0), 2)
	return p
}

// TestNodeSwap (J): the drop-in promise under kubelet, both ways. Upstream cri-dockerd runs a pod;
// our binary replaces it on the same socket, root and CNI directories; kubelet keeps the pod (same
// sandbox, IP, containers, restart counts), its log keeps growing, and a new pod starts. Then
// upstream replaces ours again, with the pod ours started and upstream's first one; kubelet keeps
// both, and a new pod starts. Upstream links a container's log path to the engine's log only when
// it starts the container (docs/compatibility.md): after the swap back, the logs of containers ours started stop
// growing until they restart, so there only the restarted containers' logs are checked.
func TestNodeSwap(t *testing.T) {
	up := upstreamBinary(t)
	n := startNode(t, nodeOpts{binary: up})
	n.apply(t, swapPod("swap-a"))
	a := n.swapSnapshot(t, "swap-a")
	counterA := n.podLog(a.name, a.uid, "counter", 0)
	waitCountedPast(t, counterA, 2)
	assert.Assert(t, isLink(t, counterA), "upstream links the log path to the engine's log")

	var pods []swapSnapshot
	t.Run("J/upstream to ours", func(t *testing.T) {
		pods = n.swapTo(t, env.binary, "poke-1", true, []swapSnapshot{a})
		// Ours adopted upstream's container: kubelet's path is its CRI-format copy, no line lost or doubled.
		assert.Check(t, !isLink(t, counterA))
		t.Logf("swap-a's counter log: lines 1 to %d", checkCountedLog(t, counterA))
		pods = append(pods, n.startSwapPod(t, "swap-b", pods))
	})
	t.Run("J/ours to upstream", func(t *testing.T) {
		assert.Assert(t, is.Len(pods, 2))
		pods = n.swapTo(t, up, "poke-2", false, pods)
		c := n.startSwapPod(t, "swap-c", pods)
		assert.Check(t, isLink(t, n.podLog(c.name, c.uid, "counter", 0)), "upstream runs swap-c")
	})
}

// startProxyBackend starts the node's proxyBackend with the node's pod flags (CNI, root, sandbox
// image) on a socket of its own, and returns our binary's flags as the pin proxy in front of it.
func (n *node) startProxyBackend(t testing.TB) []string {
	t.Helper()
	flags := append(n.pn.flags(filepath.Join(t.TempDir(), "backend-root")), "--log-level", "info")
	n.backend = startShimBin(t, n.opts.proxyBackend[0], append(flags, n.opts.proxyBackend[1:]...)...)
	return append([]string{"--pin-proxy-backend", n.backend.endpoint, "--pod-infra-container-image", pauseRef,
		"--log-level", "info"}, n.opts.shimFlags...)
}

// TestNodeImageGCThroughProxy: kubelet talks to our binary as the pin proxy, in front of a
// cri-dockerd that pins nothing but its sandbox image (upstream's own build; ours with its pin
// sources off). kubelet's image GC (eviction mode, as TestNodeImageGC) must keep every image one of
// the proxy's pin sources pins, which the backend alone lists unpinned, and remove an unpinned
// unused one; a static pod then runs through the proxy.
func TestNodeImageGCThroughProxy(t *testing.T) {
	requireNode(t)
	pauseImage(t)
	eachBackend(t, func(t *testing.T, b backend) {
		dir := t.TempDir()
		pinsFile := filepath.Join(dir, "pins")
		assert.NilError(t, os.WriteFile(pinsFile, []byte("node/proxy-gc-file:1\n"), 0o644))
		preloadDir := filepath.Join(dir, "preload")
		assert.NilError(t, os.Mkdir(preloadDir, 0o755))
		pins := map[string]string{
			"--pinned-images":    importImage(t, "node/proxy-gc-flag:1"),
			"pins file":          importImage(t, "node/proxy-gc-file:1"),
			"image-config label": importImage(t, "node/proxy-gc-label:1", pinLabel+"=pinned"),
			"preload archive":    importImage(t, "node/proxy-gc-preload:1"),
		}
		docker(t, "save", "-o", filepath.Join(preloadDir, "gc.tar"), "node/proxy-gc-preload:1")
		if env.store == "containerd" {
			pins["containerd record label"] = importImage(t, "node/proxy-gc-record:1")
			ctr(t, "images", "label", "docker.io/node/proxy-gc-record:1", pinLabel+"=pinned")
		}
		unpinned := importImage(t, "node/proxy-gc-unpinned:1")

		// Under GC pressure from kubelet's start: until the proxy's sources have state its
		// ListImages is Unavailable (fail-safe), and kubelet's GC pass fails rather than delete.
		n := startNode(t, nodeOpts{
			proxyBackend: append([]string{b.binary}, b.flags...),
			shimFlags: []string{"--pinned-images", "node/proxy-gc-flag:1", "--pinned-images-file", pinsFile,
				"--preload-images-dir", preloadDir},
			kubeletConfig: "evictionHard:\n  imagefs.available: \"99%\"\nevictionPressureTransitionPeriod: 5s",
			kubeletArgs:   "--minimum-image-ttl-duration=0s",
		})
		direct, err := n.backend.listPinned(context.Background())
		assert.NilError(t, err)
		for why, id := range pins {
			assert.Check(t, !direct[id], "the backend itself pins the image of the %s (%s): the proxy would not be what keeps it", why, id)
		}

		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if _, err := dockerErr(nil, "image", "inspect", unpinned); err == nil {
				return poll.Continue("the unpinned unused image %s is still there", unpinned)
			}
			return poll.Success()
		}, poll.WithTimeout(120*time.Second), poll.WithDelay(time.Second))
		// Another GC pass, for a wrong removal to show: the eviction manager runs every 10 s here, but
		// acts only on fresh image filesystem stats, which upstream caches for 30 s.
		gcPasses := regexp.MustCompile(`"Attempting to delete unused images"`)
		removedBy := len(n.kubeletLogLines(gcPasses))
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			if k := len(n.kubeletLogLines(gcPasses)); k <= removedBy {
				return poll.Continue("%d image GC passes, none since the removal", k)
			}
			return poll.Success()
		}, poll.WithTimeout(120*time.Second), poll.WithDelay(time.Second))
		for why, id := range pins {
			_, err := dockerErr(nil, "image", "inspect", id)
			assert.Check(t, err, "the image of the %s (%s) was removed through the proxy", why, id)
		}
		waitAllPinned(t, n.shim, pins)
		gc := n.kubeletLogLines(regexp.MustCompile(`image_gc_manager\.go|eviction_manager\.go`))
		t.Logf("kubelet's eviction and image GC log (%d lines):\n%s", len(gc), strings.Join(gc, "\n"))
		for _, l := range n.kubeletLogLines(regexp.MustCompile(`"Removing image`)) {
			assert.Check(t, strings.Contains(l, unpinned), "kubelet removed another image than the unpinned one: %s", l)
		}

		// kubelet runs a pod on the backend through the proxy (a static pod is admitted under pressure).
		n.apply(t, staticPod("proxy-gc", counterContainer("count")))
		p := n.waitRunning(t, "proxy-gc", "count")
		assert.Check(t, p.ip != "", "the pod has no IP through the proxy")
	})
}
