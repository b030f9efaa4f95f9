//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkNodeE2E is a full node as an operator runs one: kubelet (standalone, static
// pods, hack/kubelet.sh) with BENCH_NODE_PODS (default 110, kubelet's maxPods) pods,
// each a sandbox with a CNI address and one container, on our binary and then on
// upstream's (UPSTREAM_CRI_DOCKERD_BIN) on the same engine, BENCH_NODE_ROUNDS times
// (default 1) alternating which goes first. Each run reports:
//   - start: manifest written → container started (the CRI's started_at), p50/p90/p99,
//     and time until all N have started; time until kubelet's /pods shows all Running;
//   - steady state over BENCH_NODE_STEADY (default 2m) with N running: CPU seconds per
//     minute of the binary, dockerd, containerd and kubelet; the binary's RSS, threads
//     and open files; kubelet's mean PLEG relist (kubelet_pleg_relist_duration_seconds);
//   - stats: /stats/summary, ListContainerStats and ListPodSandboxStats, 10 calls each
//     (median and the slowest; upstream answers ListPodSandboxStats Unimplemented);
//   - teardown: manifests removed → no container running, → no sandbox left;
//   - arrival (BENCH_NODE_ARRIVAL_RATE pods a second, default 1, 0 for none; as
//     clusterloader2's node-throughput test): a new node, the N manifests written one
//     after another at that rate, p50/p99 of manifest → container started.
//
// BENCH_NODE_GATES (kubelet feature gates, space-separated, say "EventedPLEG
// PodAndContainerStatsFromCRI") adds a run of ours with each gate on. BENCH_NODE_SHIM_FLAGS adds flags to
// our binary (say "--log-level debug" for the request phases); BENCH_NODE_PPROF=DIR
// writes a CPU profile of our binary over the steady state to DIR/<store>-<run>.pprof.
//
// The residue after teardown (mounts, veths, leased IPs, processes) must be zero: the
// node's own check fails the run otherwise. hack/bench-node.sh (make bench-node) runs
// it on each store.
func BenchmarkNodeE2E(b *testing.B) {
	requireNode(b)
	pods := envInt("BENCH_NODE_PODS", 110)
	steady := time.Duration(envInt("BENCH_NODE_STEADY_SECONDS", 120)) * time.Second
	type run struct {
		name, path string
		gates      string // kubelet feature gates, as YAML map entries
	}
	runs := []run{{name: "ours", path: env.binary}}
	for _, gate := range strings.Fields(os.Getenv("BENCH_NODE_GATES")) {
		// Named by the gate's capitals: the run's name is in its temp dir, and kubelet's
		// sockets there must stay under the 108 bytes of a unix socket path.
		initials := strings.Map(func(r rune) rune {
			if unicode.IsUpper(r) {
				return r
			}
			return -1
		}, gate)
		b.Logf("run ours-%s: kubelet with %s", initials, gate)
		runs = append(runs, run{name: "ours-" + initials, path: env.binary, gates: gate + ": true"})
	}
	if env.upstream != "" {
		runs = append(runs, run{name: "upstream", path: env.upstream})
	}
	rate := envFloat(b, "BENCH_NODE_ARRIVAL_RATE", 1)
	for round := range envInt("BENCH_NODE_ROUNDS", 1) {
		order := slices.Clone(runs)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range order {
			opts := nodeOpts{binary: r.path, kubeletConfig: fmt.Sprintf("maxPods: %d", pods+10)}
			if r.gates != "" {
				opts.kubeletConfig += "\nfeatureGates: {" + r.gates + "}"
			}
			var profile string
			if r.path == env.binary {
				opts.shimFlags = strings.Fields(os.Getenv("BENCH_NODE_SHIM_FLAGS"))
				if dir := os.Getenv("BENCH_NODE_PPROF"); dir != "" {
					opts.shimFlags = append(opts.shimFlags, "--metrics-address", "127.0.0.1:0", "--enable-pprof")
					profile = filepath.Join(dir, env.store+"-"+r.name+".pprof")
				}
			}
			b.Run(fmt.Sprintf("binary=%s/pods=%d", r.name, pods), func(b *testing.B) {
				for range b.N {
					runNodeBench(b, opts, pods, steady, profile)
				}
			})
			if rate > 0 && r.gates == "" { // the gated runs compare the steady state
				b.Run(fmt.Sprintf("binary=%s/arrival=%gps/pods=%d", r.name, rate, pods), func(b *testing.B) {
					for range b.N {
						runArrivalBench(b, opts, pods, rate)
					}
				})
			}
		}
	}
}

// envFloat returns the number in environment variable key, def when unset.
func envFloat(t testing.TB, key string, def float64) float64 {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	assert.NilError(t, err, key)
	return f
}

// runArrivalBench writes pods manifests at rate a second on a new node and reports the
// quantiles of manifest → container started.
func runArrivalBench(b *testing.B, opts nodeOpts, pods int, rate float64) {
	n := startNode(b, opts)
	written := make(map[string]time.Time, pods)
	every := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for i := range pods {
		name := fmt.Sprintf("arrive-%03d", i)
		c := counterContainer("app")
		c["env"] = []map[string]string{{"name": "INTERVAL", "value": "10s"}}
		time.Sleep(time.Until(next))
		written[podName(name)] = time.Now()
		n.apply(b, staticPod(name, c))
		next = next.Add(every)
	}
	starts, _ := startLatencies(b, n, pods, written)
	b.ReportMetric(quantile(starts, 0.5).Seconds(), "start-p50-s")
	b.ReportMetric(quantile(starts, 0.99).Seconds(), "start-p99-s")
	b.ReportMetric(quantile(starts, 1).Seconds(), "start-max-s")
	n.down(b)
}

// startLatencies waits until pods containers run and returns, sorted, how long each took
// from its manifest's writing (written, by pod name) to its container's start, and when
// the last one started.
func startLatencies(b *testing.B, n *node, pods int, written map[string]time.Time) ([]time.Duration, time.Time) {
	ctx := context.Background()
	var running []*runtimeapi.Container
	poll.WaitOn(b, func(poll.LogT) poll.Result {
		resp, err := n.shim.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
		if err != nil {
			return poll.Continue("list: %v", err)
		}
		if running = resp.GetContainers(); len(running) < pods {
			return poll.Continue("%d of %d containers running", len(running), pods)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Minute), poll.WithDelay(time.Second))
	var starts []time.Duration
	var last time.Time
	for _, c := range running {
		st, err := n.shim.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
		assert.NilError(b, err)
		at := time.Unix(0, st.GetStatus().GetStartedAt())
		starts = append(starts, at.Sub(written[c.GetLabels()["io.kubernetes.pod.name"]]))
		if at.After(last) {
			last = at
		}
	}
	slices.Sort(starts)
	return starts, last
}

func runNodeBench(b *testing.B, opts nodeOpts, pods int, steady time.Duration, profile string) {
	n := startNode(b, opts)
	ctx := context.Background()

	// Start: every manifest at once.
	written := make(map[string]time.Time, pods)
	for i := range pods {
		name := fmt.Sprintf("bench-%03d", i)
		c := counterContainer("app")
		c["env"] = []map[string]string{{"name": "INTERVAL", "value": "10s"}}
		written[podName(name)] = time.Now()
		n.apply(b, staticPod(name, c))
	}
	first := written[podName("bench-000")]
	starts, last := startLatencies(b, n, pods, written)
	b.ReportMetric(quantile(starts, 0.5).Seconds(), "start-p50-s")
	b.ReportMetric(quantile(starts, 0.9).Seconds(), "start-p90-s")
	b.ReportMetric(quantile(starts, 0.99).Seconds(), "start-p99-s")
	b.ReportMetric(last.Sub(first).Seconds(), "all-started-s")
	poll.WaitOn(b, func(poll.LogT) poll.Result {
		if r := n.kubeletRunning(b); r < pods {
			return poll.Continue("kubelet reports %d of %d pods running", r, pods)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Minute), poll.WithDelay(500*time.Millisecond))
	b.ReportMetric(time.Since(first).Seconds(), "all-running-s")

	// Steady state.
	time.Sleep(10 * time.Second) // kubelet's first status and stats rounds
	procs := nodeProcesses(b, n)
	cpu0 := cpuTicks(procs)
	pleg0 := n.plegRelist(b)
	t0 := time.Now()
	profiled := make(chan error, 1)
	if profile != "" {
		go func() { profiled <- fetchProfile(metricsAddr(b, n.shim), profile, steady-5*time.Second) }()
	} else {
		profiled <- nil
	}
	time.Sleep(steady)
	assert.NilError(b, <-profiled)
	cpu1 := cpuTicks(procs)
	pleg1 := n.plegRelist(b)
	minutes := time.Since(t0).Minutes()
	for name := range procs {
		b.ReportMetric(float64(cpu1[name]-cpu0[name])/clockTicks/minutes, "cpu-"+name+"-s/min")
	}
	if d := pleg1.count - pleg0.count; d > 0 {
		b.ReportMetric((pleg1.sum-pleg0.sum)/d*1000, "pleg-relist-ms")
	}
	shimPid := n.shim.cmd.Process.Pid
	b.ReportMetric(float64(procStatusKiB(b, shimPid, "VmRSS:"))/1024, "rss-MiB")
	b.ReportMetric(float64(procStatusKiB(b, shimPid, "Threads:")), "threads")
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", shimPid)); err == nil {
		b.ReportMetric(float64(len(fds)), "fds")
	}

	// Stats, as kubelet's summary and crictl stats/statsp ask.
	reportCalls(b, "summary", func() error {
		code, body := n.get(b, "/stats/summary")
		if code != 200 {
			return fmt.Errorf("/stats/summary: %d %.200s", code, body)
		}
		return nil
	})
	reportCalls(b, "crictl-stats", func() error {
		resp, err := n.shim.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
		if err == nil && len(resp.GetStats()) < pods {
			err = fmt.Errorf("ListContainerStats: %d of %d containers", len(resp.GetStats()), pods)
		}
		return err
	})
	if _, err := n.shim.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{}); err == nil {
		reportCalls(b, "crictl-statsp", func() error {
			_, err := n.shim.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
			return err
		})
	} else {
		b.Logf("ListPodSandboxStats: %v", err)
	}

	// Teardown.
	entries, err := os.ReadDir(filepath.Join(n.dir, "manifests"))
	assert.NilError(b, err)
	gone := time.Now()
	for _, e := range entries {
		assert.NilError(b, os.Remove(filepath.Join(n.dir, "manifests", e.Name())))
	}
	poll.WaitOn(b, func(poll.LogT) poll.Result {
		resp, err := n.shim.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
		if err != nil || len(resp.GetContainers()) > 0 {
			return poll.Continue("containers still running: %d %v", len(resp.GetContainers()), err)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Minute), poll.WithDelay(250*time.Millisecond))
	b.ReportMetric(time.Since(gone).Seconds(), "all-stopped-s")
	poll.WaitOn(b, func(poll.LogT) poll.Result {
		if ready := n.sandboxes(b, "", true); len(ready) > 0 {
			return poll.Continue("%d sandboxes still ready", len(ready))
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Minute), poll.WithDelay(250*time.Millisecond))
	b.ReportMetric(time.Since(gone).Seconds(), "all-sandboxes-stopped-s")
	n.down(b) // stops kubelet, removes what is left, fails on any residue
}

// fetchProfile writes a CPU profile over d of the binary serving pprof at addr to path.
func fetchProfile(addr, path string, d time.Duration) error {
	client := &http.Client{Timeout: d + time.Minute}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof profile: %s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// reportCalls times 10 calls of f and reports the median and the slowest, in ms.
func reportCalls(b *testing.B, name string, f func() error) {
	b.Helper()
	var durs []time.Duration
	for range 10 {
		start := time.Now()
		assert.NilError(b, f())
		durs = append(durs, time.Since(start))
	}
	slices.Sort(durs)
	b.ReportMetric(float64(quantile(durs, 0.5).Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(durs[len(durs)-1].Microseconds())/1000, name+"-max-ms")
}

// kubeletRunning counts the pods kubelet's /pods shows Running.
func (n *node) kubeletRunning(t testing.TB) int {
	t.Helper()
	code, body := n.get(t, "/pods")
	if code != 200 {
		return 0
	}
	var list struct {
		Items []podStatusJSON `json:"items"`
	}
	if json.Unmarshal(body, &list) != nil {
		return 0
	}
	var r int
	for _, p := range list.Items {
		if p.Status.Phase == "Running" {
			r++
		}
	}
	return r
}

type plegSample struct{ sum, count float64 }

var plegRe = regexp.MustCompile(`(?m)^kubelet_pleg_relist_duration_seconds_(sum|count) ([0-9.e+-]+)$`)

// plegRelist reads kubelet's PLEG relist histogram's sum and count from its /metrics.
func (n *node) plegRelist(t testing.TB) plegSample {
	t.Helper()
	code, body := n.get(t, "/metrics")
	assert.Equal(t, code, 200, "%.200s", body)
	var s plegSample
	for _, m := range plegRe.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		assert.NilError(t, err)
		if m[1] == "sum" {
			s.sum = v
		} else {
			s.count = v
		}
	}
	return s
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// nodeProcesses are the node's processes whose CPU the bench measures, by name: the
// binary under test, dockerd, containerd (the stack's own, else dockerd's child) and kubelet.
func nodeProcesses(t testing.TB, n *node) map[string]int {
	t.Helper()
	out := map[string]int{"shim": n.shim.cmd.Process.Pid}
	readPid := func(path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	out["kubelet"] = readPid(filepath.Join(n.dir, "kubelet.pid"))
	out["dockerd"] = readPid(filepath.Join(env.stackDir, "dockerd.pid"))
	out["containerd"] = readPid(filepath.Join(env.stackDir, "containerd.pid"))
	if out["containerd"] == 0 {
		out["containerd"] = childNamed(out["dockerd"], "containerd")
	}
	for name, pid := range out {
		assert.Assert(t, pid > 0, "no pid for %s", name)
	}
	return out
}

// childNamed returns the pid of parent's child whose command is comm, 0 when none.
func childNamed(parent int, comm string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if s[open+1:closing] == comm && len(f) > 1 && f[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	return 0
}

// cpuTicks reads each process's user+system CPU time in clock ticks.
func cpuTicks(procs map[string]int) map[string]uint64 {
	out := map[string]uint64{}
	for name, pid := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// after "(comm)": state(0) ppid ... utime(11) stime(12)
		if len(f) > 12 {
			u, _ := strconv.ParseUint(f[11], 10, 64)
			st, _ := strconv.ParseUint(f[12], 10, 64)
			out[name] = u + st
		}
	}
	return out
}
