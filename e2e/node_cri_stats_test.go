//go:build e2e

package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// summaryPod is what the test reads of a pod in kubelet's /stats/summary: every figure a
// pointer, so that a missing one shows.
type summaryPod struct {
	PodRef struct {
		Name string `json:"name"`
	} `json:"podRef"`
	CPU     *struct{ UsageNanoCores *uint64 }  `json:"cpu"`
	Memory  *struct{ WorkingSetBytes *uint64 } `json:"memory"`
	Network *struct{ RxBytes *uint64 }         `json:"network"`
	Storage *struct{ UsedBytes *uint64 }       `json:"ephemeral-storage"`
	Ctrs    []struct {
		Name   string                                  `json:"name"`
		CPU    *struct{ UsageCoreNanoSeconds *uint64 } `json:"cpu"`
		Memory *struct{ WorkingSetBytes *uint64 }      `json:"memory"`
		Rootfs *struct{ UsedBytes *uint64 }            `json:"rootfs"`
		Logs   *struct{ UsedBytes *uint64 }            `json:"logs"`
	} `json:"containers"`
}

// missing names what pod's summary lacks: CPU, memory, network and ephemeral storage of
// the pod, CPU, memory, rootfs and logs of each container.
func (p summaryPod) missing() []string {
	var out []string
	need := func(ok bool, what string) {
		if !ok {
			out = append(out, what)
		}
	}
	need(p.CPU != nil && p.CPU.UsageNanoCores != nil, "pod cpu")
	need(p.Memory != nil && p.Memory.WorkingSetBytes != nil, "pod memory")
	need(p.Network != nil && p.Network.RxBytes != nil, "pod network")
	need(p.Storage != nil && p.Storage.UsedBytes != nil, "pod ephemeral-storage")
	need(len(p.Ctrs) > 0, "containers")
	for _, c := range p.Ctrs {
		need(c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil, c.Name+" cpu")
		need(c.Memory != nil && c.Memory.WorkingSetBytes != nil, c.Name+" memory")
		need(c.Rootfs != nil && c.Rootfs.UsedBytes != nil, c.Name+" rootfs")
		need(c.Logs != nil && c.Logs.UsedBytes != nil, c.Name+" logs")
	}
	return out
}

// TestNodeStatsFromCRI: with kubelet's PodAndContainerStatsFromCRI gate, kubelet takes
// every pod and container figure from our CRI stats (ListPodSandboxStats,
// ListContainerStats) and /metrics/cadvisor from ListPodSandboxMetrics: the summary has
// the pod's CPU, memory, network and ephemeral storage and each container's CPU,
// memory, rootfs and logs; /metrics/cadvisor has the container's series.
func TestNodeStatsFromCRI(t *testing.T) {
	n := startNode(t, nodeOpts{kubeletConfig: "featureGates: {PodAndContainerStatsFromCRI: true}"})
	n.apply(t, staticPod("cristats", counterContainer("app")))
	n.waitRunning(t, "cristats", "app")
	var pod summaryPod
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		code, body := n.get(t, "/stats/summary")
		if code != 200 {
			return poll.Continue("/stats/summary: %d %.200s", code, body)
		}
		var sum struct {
			Pods []summaryPod `json:"pods"`
		}
		assert.NilError(t, json.Unmarshal(body, &sum))
		for _, p := range sum.Pods {
			if p.PodRef.Name == podName("cristats") {
				pod = p
			}
		}
		if m := pod.missing(); len(m) > 0 {
			return poll.Continue("the pod's summary lacks %v", m)
		}
		return poll.Success()
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(2*time.Second))

	series := regexp.MustCompile(`(?m)^(container_cpu_usage_seconds_total|container_memory_working_set_bytes|container_fs_usage_bytes|container_network_receive_bytes_total)\{[^}]*pod="` + regexp.QuoteMeta(podName("cristats")) + `"`)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		code, body := n.get(t, "/metrics/cadvisor")
		if code != 200 {
			return poll.Continue("/metrics/cadvisor: %d", code)
		}
		got := map[string]bool{}
		for _, m := range series.FindAllStringSubmatch(string(body), -1) {
			got[m[1]] = true
		}
		if len(got) < 4 {
			return poll.Continue("/metrics/cadvisor has %v of the pod's series; sample: %.300s", got, firstLines(string(body), "container_cpu_usage_seconds_total"))
		}
		return poll.Success()
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(2*time.Second))
}

// firstLines returns the lines of s that start with prefix, the first few.
func firstLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) && len(out) < 3 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
