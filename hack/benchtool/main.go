// Command benchtool computes the tables of `make bench-lifecycle` (hack/bench-lifecycle.sh) from a
// run's output folder, BENCH_OUT/STORE:
//
//	benchtool table  DIR STORE   per op: n, upstream's, the baseline's and ours' median (p90) in ms, the ratio
//	                             of the medians, and the range of the per-round ratios (a range that spans 1
//	                             is a tie)
//	benchtool usage  DIR STORE   each binary's CPU seconds per critest run (median) and peak RSS
//	benchtool phases DIR STORE   where ours' time went per op (from its "request phases" log lines)
//
// DIR/STORE holds one folder per counted run, WHO-I (WHO: ours, upstream, baseline; I: the round), with
// critest's *_benchmark_data.json, ginkgo's report*.json and hack/critest.sh's cri-usage.json, and ours'
// log of each run, ours-I.cri.log. Quantiles are taken as the element at round((n-1)*p) of the sorted
// samples; figures are rounded to one decimal (ms) or two (ratios).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	if len(args) != 3 {
		return errors.New("usage: benchtool table|usage|phases DIR STORE")
	}
	dir, store := args[1], args[2]
	switch args[0] {
	case "table":
		return table(w, dir, store)
	case "usage":
		return usage(w, dir, store)
	case "phases":
		return phases(w, dir, store)
	}
	return fmt.Errorf("unknown command %q (table, usage or phases)", args[0])
}

// sample is one timed operation.
type sample struct {
	op string
	ms float64
}

// rpcOf names critest's operations by the CRI call they time.
var rpcOf = map[string]string{
	"CreatePod": "RunPodSandbox", "StatusPod": "PodSandboxStatus", "StopPod": "StopPodSandbox",
	"RemovePod": "RemovePodSandbox", "StatusContainer": "ContainerStatus",
}

// tableOps are the ops of the table, in order.
var tableOps = []string{"RunPodSandbox", "PodSandboxStatus", "StopPodSandbox", "RemovePodSandbox", "CreateContainer",
	"StartContainer", "ContainerStatus", "StopContainer", "RemoveContainer", "PodAndContainer"}

// phaseOps are the ops of the phases table, in order.
var phaseOps = []string{"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer", "StartContainer",
	"StopContainer", "RemoveContainer"}

// runDirs returns the folders of who's counted runs in dir/store ("ours" matches ours-1, ours-2, ...),
// by round.
func runDirs(dir, store, who string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, store, who+"-*"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out[strings.TrimPrefix(filepath.Base(p), who+"-")] = p
		}
	}
	return out, nil
}

// samplesOf reads every sample of the runs in dirs: critest's benchmark data and the "from scratch"
// measurements in ginkgo's JSON reports.
func samplesOf(dirs ...string) ([]sample, error) {
	var out []sample
	for _, d := range dirs {
		data, _ := filepath.Glob(filepath.Join(d, "*_benchmark_data.json"))
		reports, _ := filepath.Glob(filepath.Join(d, "report*.json"))
		for _, f := range data {
			s, err := benchmarkData(f)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		for _, f := range reports {
			s, err := ginkgoReport(f)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
	}
	return out, nil
}

func benchmarkData(path string) ([]sample, error) {
	var d struct {
		OperationsNames []string `json:"operationsNames"`
		Datapoints      []struct {
			OperationsDurationsNs []float64 `json:"operationsDurationsNs"`
		} `json:"datapoints"`
	}
	if err := readJSON(path, &d); err != nil {
		return nil, err
	}
	var out []sample
	for _, dp := range d.Datapoints {
		for i, ns := range dp.OperationsDurationsNs {
			if i >= len(d.OperationsNames) {
				break
			}
			op := d.OperationsNames[i]
			if rpc, ok := rpcOf[op]; ok {
				op = rpc
			}
			out = append(out, sample{op: op, ms: ns / 1e6})
		}
	}
	return out, nil
}

func ginkgoReport(path string) ([]sample, error) {
	var reports []struct {
		SpecReports []struct {
			ReportEntries []struct {
				Name  string
				Value struct{ AsJSON string }
			}
		}
	}
	if err := readJSON(path, &reports); err != nil {
		return nil, err
	}
	var out []sample
	for _, r := range reports {
		for _, s := range r.SpecReports {
			for _, e := range s.ReportEntries {
				if e.Name != "start-container-benchmark" {
					continue
				}
				var v struct {
					Measurements []struct {
						Name      string
						Durations []float64
					}
				}
				if err := json.Unmarshal([]byte(e.Value.AsJSON), &v); err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
				for _, m := range v.Measurements {
					if m.Name != "create PodSandbox and container" {
						continue
					}
					for _, ns := range m.Durations {
						out = append(out, sample{op: "PodAndContainer", ms: ns / 1e6})
					}
				}
			}
		}
	}
	return out, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// quantile is the element at round((n-1)*p) of the sorted values; they must not be empty.
func quantile(vals []float64, p float64) float64 {
	v := append([]float64(nil), vals...)
	sort.Float64s(v)
	return v[int(math.Round(float64(len(v)-1)*p))]
}

// r1 and r2 round to one and two decimals; num prints a number as short as it is.
func r1(x float64) float64 { return math.Round(x*10) / 10 }
func r2(x float64) float64 { return math.Round(x*100) / 100 }
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// stat is one op's figures in a set of samples.
type stat struct {
	n        int
	med, p90 float64
}

func statOf(s []sample, op string) *stat {
	var v []float64
	for _, x := range s {
		if x.op == op {
			v = append(v, x.ms)
		}
	}
	if len(v) == 0 {
		return nil
	}
	return &stat{n: len(v), med: quantile(v, 0.5), p90: quantile(v, 0.9)}
}

func cell(s *stat) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", num(r1(s.med)), num(r1(s.p90)))
}

func samplesOfWho(dir, store, who string) ([]sample, map[string]string, error) {
	dirs, err := runDirs(dir, store, who)
	if err != nil {
		return nil, nil, err
	}
	var list []string
	for _, d := range dirs {
		list = append(list, d)
	}
	sort.Strings(list)
	s, err := samplesOf(list...)
	return s, dirs, err
}

func table(w io.Writer, dir, store string) error {
	up, upDirs, err := samplesOfWho(dir, store, "upstream")
	if err != nil {
		return err
	}
	ours, oursDirs, err := samplesOfWho(dir, store, "ours")
	if err != nil {
		return err
	}
	base, _, err := samplesOfWho(dir, store, "baseline")
	if err != nil {
		return err
	}
	type round struct{ ours, up []sample }
	var rounds []round
	var keys []string
	for k := range oursDirs {
		if _, ok := upDirs[k]; ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		o, err := samplesOf(oursDirs[k])
		if err != nil {
			return err
		}
		u, err := samplesOf(upDirs[k])
		if err != nil {
			return err
		}
		rounds = append(rounds, round{o, u})
	}
	spread := func(op string) string {
		var ratios []float64
		for _, r := range rounds {
			o, u := statOf(r.ours, op), statOf(r.up, op)
			if o != nil && u != nil {
				ratios = append(ratios, o.med/u.med)
			}
		}
		if len(ratios) < 2 {
			return "-"
		}
		sort.Float64s(ratios)
		return num(r2(ratios[0])) + "-" + num(r2(ratios[len(ratios)-1]))
	}
	withBase := len(base) > 0
	fmt.Fprintf(w, "%s store: median (p90) in ms\n", store)
	if withBase {
		fmt.Fprintln(w, "| op | n | upstream | baseline | ours | ours/upstream | per round |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	} else {
		fmt.Fprintln(w, "| op | n | upstream | ours | ours/upstream | per round |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
	}
	for _, op := range tableOps {
		u, o := statOf(up, op), statOf(ours, op)
		if u == nil || o == nil {
			continue
		}
		b := ""
		if withBase {
			b = " " + cell(statOf(base, op)) + " |"
		}
		fmt.Fprintf(w, "| %s | %d | %s |%s %s | %sx | %s |\n", op, o.n, cell(u), b, cell(o), num(r2(o.med/u.med)), spread(op))
	}
	return nil
}

func usage(w io.Writer, dir, store string) error {
	for _, who := range []string{"upstream", "baseline", "ours"} {
		files, err := filepath.Glob(filepath.Join(dir, store, who+"-*", "cri-usage.json"))
		if err != nil || len(files) == 0 {
			continue
		}
		sort.Strings(files)
		var cpu []float64
		var rss float64
		for _, f := range files {
			var u struct {
				CPU float64 `json:"cpu_s"`
				RSS float64 `json:"rss_peak_kib"`
			}
			if err := readJSON(f, &u); err != nil {
				return err
			}
			cpu = append(cpu, u.CPU)
			rss = math.Max(rss, u.RSS)
		}
		sort.Float64s(cpu)
		fmt.Fprintf(w, "%s: cri-dockerd CPU %s s per run (median of %d), peak RSS %s MiB\n",
			who, num(cpu[(len(cpu)-1)/2]), len(cpu), num(r1(rss/1024)))
	}
	return nil
}

// phase is one request's time split as its "request phases" line tells.
type phase struct {
	op                        string
	d, engine, cni, files, me float64
}

var (
	fieldRE = regexp.MustCompile(` ([a-z_.]+)="?([^ "]+)`)
	phaseRE = regexp.MustCompile(`^([^/]+)(?:/([0-9]+))?$`)
)

// ms parses a Go duration ("12.5ms", "3µs", "1m2s") into milliseconds.
func ms(s string) (float64, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", s, err)
	}
	return float64(d) / float64(time.Millisecond), nil
}

// parsePhase parses a phase value: "12.50ms" or "25.00ms/2" (two calls).
func parsePhase(v string) (float64, float64, error) {
	m := phaseRE.FindStringSubmatch(v)
	if m == nil {
		return 0, 0, fmt.Errorf("phase %q", v)
	}
	d, err := ms(m[1])
	if err != nil {
		return 0, 0, err
	}
	n := 1.0
	if m[2] != "" {
		n, _ = strconv.ParseFloat(m[2], 64)
	}
	return d, n, nil
}

// parsePhases reads one "request phases" line: engine is each engine call kind's time over its count
// (a pod's containers, handled at once, count once), at most the RPC's; CNI the longer of loopback and
// the pod network's chains (they run at once); files the checkpoint; ours the rest.
func parsePhases(line string) (phase, error) {
	var p phase
	var lo, net float64
	for _, m := range fieldRE.FindAllStringSubmatch(line, -1) {
		k, v := m[1], m[2]
		switch {
		case k == "rpc":
			p.op = v
		case k == "duration":
			d, err := ms(v)
			if err != nil {
				return p, err
			}
			p.d = d
		case strings.HasPrefix(k, "t."):
			d, n, err := parsePhase(v)
			if err != nil {
				return p, err
			}
			switch k = strings.TrimPrefix(k, "t."); {
			case strings.HasPrefix(k, "engine."):
				p.engine += d / n
			case strings.HasPrefix(k, "cni.loopback."):
				lo += d
			case strings.HasPrefix(k, "cni."):
				net += d
			case strings.HasPrefix(k, "checkpoint."):
				p.files += d
			}
		}
	}
	p.cni = math.Max(lo, net)
	p.engine = math.Min(p.engine, p.d)
	p.me = p.d - p.engine - p.cni - p.files
	return p, nil
}

func phases(w io.Writer, dir, store string) error {
	logs, _ := filepath.Glob(filepath.Join(dir, store, "ours-*.cri.log"))
	sort.Strings(logs)
	var all []phase
	for _, f := range logs {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `msg="request phases"`) {
				continue
			}
			p, err := parsePhases(sc.Text())
			if err != nil {
				_ = fh.Close()
				return fmt.Errorf("%s: %w", f, err)
			}
			all = append(all, p)
		}
		err = sc.Err()
		_ = fh.Close()
		if err != nil {
			return err
		}
	}
	if len(all) == 0 {
		return nil // ours ran without --log-level=debug
	}
	up, _, err := samplesOfWho(dir, store, "upstream")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s store, ours: where the time went (medians in ms)\n", store)
	fmt.Fprintln(w, "| op | n | RPC | engine | CNI | files | ours | upstream | engine/upstream |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, op := range phaseOps {
		var d, engine, cni, files, me []float64
		for _, p := range all {
			if p.op == op {
				d, engine, cni, files, me = append(d, p.d), append(engine, p.engine), append(cni, p.cni), append(files, p.files), append(me, p.me)
			}
		}
		if len(d) == 0 {
			continue
		}
		u, share := "-", "-"
		if s := statOf(up, op); s != nil {
			u, share = num(r1(s.med)), num(r2(quantile(engine, 0.5)/s.med))+"x"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", op, len(d),
			num(r1(quantile(d, 0.5))), num(r1(quantile(engine, 0.5))), num(r1(quantile(cni, 0.5))),
			num(r1(quantile(files, 0.5))), num(r1(quantile(me, 0.5))), u, share)
	}
	return nil
}
