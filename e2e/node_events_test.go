//go:build e2e

package e2e

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
)

// eventedRe reads kubelet's EventedPLEG metrics: connections made and failed, and the
// events received (the latency histogram's count).
var eventedRe = regexp.MustCompile(`(?m)^kubelet_evented_pleg_connection_(success_count|error_count|latency_seconds_count)(?:\{[^}]*\})? ([0-9.e+]+)$`)

// evented returns kubelet's EventedPLEG counters by name (success_count, error_count,
// latency_seconds_count: the events it received).
func (n *node) evented(t testing.TB) map[string]float64 {
	t.Helper()
	code, body := n.get(t, "/metrics")
	assert.Equal(t, code, 200, "%.200s", body)
	out := map[string]float64{}
	for _, m := range eventedRe.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		assert.NilError(t, err)
		out[m[1]] += v
	}
	return out
}

// TestNodeEventedPLEG: kubelet 1.37 with its EventedPLEG gate follows our
// GetContainerEvents: it connects, receives the events of a pod's start, every one with
// the pod's sandbox status (it logs an error for any without), and a container killed
// behind its back is restarted. After our binary restarts kubelet connects again (or, past
// its five attempts, relists alone) and a killed container is still restarted.
func TestNodeEventedPLEG(t *testing.T) {
	n := startNode(t, nodeOpts{kubeletConfig: "featureGates: {EventedPLEG: true}"})
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if m := n.evented(t); m["success_count"] < 1 {
			return poll.Continue("kubelet has not connected to GetContainerEvents: %v", m)
		}
		return poll.Success()
	}, poll.WithTimeout(60*time.Second), poll.WithDelay(500*time.Millisecond))

	n.apply(t, staticPod("evented", counterContainer("app")))
	p := n.waitRunning(t, "evented", "app")
	// kubelet created the container once (a PodSandboxStatus with a timestamp but no
	// container statuses made it create one at every sync).
	time.Sleep(3 * time.Second)
	assert.Check(t, is.Len(n.containers(t, p.sandbox.GetId()), 1), "containers of the pod")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if m := n.evented(t); m["latency_seconds_count"] < 4 { // sandbox and container: created, started
			return poll.Continue("kubelet received %v events", m["latency_seconds_count"])
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(500*time.Millisecond))

	killed := func(id string, restarts int) {
		t.Helper()
		docker(t, "kill", id)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			st := n.kubeletStatuses(t, "evented")["app"]
			if st.RestartCount < restarts || st.State.Running == nil {
				return poll.Continue("app: %+v", st)
			}
			return poll.Success()
		}, poll.WithTimeout(60*time.Second), poll.WithDelay(250*time.Millisecond))
	}
	before := n.evented(t)
	killed(p.containers["app"].GetId(), 1)
	after := n.evented(t)
	assert.Check(t, after["latency_seconds_count"] > before["latency_seconds_count"], "no event for the kill: %v then %v", before, after)
	assert.Check(t, is.Equal(after["error_count"], float64(0)), "%v", after)

	n.restartShim(t, false)
	p = n.waitRunning(t, "evented", "app")
	killed(p.containers["app"].GetId(), 2)
	m := n.evented(t)
	t.Logf("kubelet's EventedPLEG after our restart: %v", m)
	assert.Check(t, m["error_count"] >= 1, "kubelet saw the stream end: %v", m)
	assert.Check(t, is.Len(n.kubeletLogLines(regexp.MustCompile(`nil PodSandboxStatus`)), 0), "an event without a sandbox status")
}
