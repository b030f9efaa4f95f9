//go:build e2e

package e2e

import (
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
)

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
func (n *node) swapSnapshot(t *testing.T, name string) swapSnapshot {
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
func lastCounted(t *testing.T, path string) int {
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
func waitCountedPast(t *testing.T, path string, after int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if got := lastCounted(t, path); got <= after {
			return poll.Continue("%s: last line %d, waiting for one past %d", path, got, after)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(200*time.Millisecond))
}

// isLink tells whether kubelet's log path is a symbolic link (upstream's, to the engine's log).
func isLink(t *testing.T, path string) bool {
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
func (n *node) swapTo(t *testing.T, binary, poke string, existingLogs bool, pods []swapSnapshot) []swapSnapshot {
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
func (n *node) startSwapPod(t *testing.T, name string, others []swapSnapshot) swapSnapshot {
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
// it starts the container (README): after the swap back, the logs of containers ours started stop
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
