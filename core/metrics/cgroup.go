package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
)

// cgroup is where a process's cgroup files are: one directory on cgroup v2, one per
// controller on v1 (with, in a hybrid hierarchy, a v2 directory for pressure).
type cgroup struct {
	// unified is the v2 directory ("" when there is none).
	unified string
	// v1 are the v1 directories by controller (nil on a pure v2 host).
	v1 map[string]string
}

// cgroupOf locates pid's cgroups from /proc/<pid>/cgroup.
func (c *Collector) cgroupOf(pid int) (*cgroup, error) {
	b, err := os.ReadFile(c.proc(pid, "cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("process %d is gone: %w", pid, cerrdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read cgroups of process %d: %w", pid, err)
	}
	mnt := filepath.Join(c.root, "sys", "fs", "cgroup")
	_, err = os.Stat(filepath.Join(mnt, "cgroup.controllers"))
	pureV2 := err == nil
	cg := &cgroup{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		if parts[0] == "0" && ctrls == "" {
			dir := filepath.Join(mnt, path)
			if !pureV2 {
				dir = filepath.Join(mnt, "unified", path)
			}
			if isDir(dir) {
				cg.unified = dir
			}
			continue
		}
		if pureV2 {
			continue
		}
		for _, ctrl := range strings.Split(ctrls, ",") {
			if ctrl == "" || strings.HasPrefix(ctrl, "name=") {
				continue
			}
			// Co-mounted controllers ("cpu,cpuacct") usually have a symlink per controller.
			dir := filepath.Join(mnt, ctrl, path)
			if !isDir(dir) {
				dir = filepath.Join(mnt, ctrls, path)
			}
			if cg.v1 == nil {
				cg.v1 = map[string]string{}
			}
			cg.v1[ctrl] = dir
		}
	}
	return cg, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// v2 tells whether the cgroup's controllers are on cgroup v2.
func (cg *cgroup) v2() bool { return cg.v1 == nil && cg.unified != "" }

// file returns the path of a controller's file: the v2 directory's on v2, the
// controller's own on v1 ("" when the process is in no such hierarchy).
func (cg *cgroup) file(ctrl, name string) string {
	if cg.v2() {
		return filepath.Join(cg.unified, name)
	}
	if dir, ok := cg.v1[ctrl]; ok {
		return filepath.Join(dir, name)
	}
	return ""
}

// cpu emits CPU usage and CFS throttling.
func (cg *cgroup) cpu(e *emitter) {
	if cg.v2() {
		st, ok := readKeyed(cg.file("cpu", "cpu.stat"))
		if !ok {
			return
		}
		if v, ok := st["usage_usec"]; ok {
			e.add("container_cpu_usage_seconds_total", seconds(v, 1e6), "total")
		}
		if v, ok := st["user_usec"]; ok {
			e.add("container_cpu_user_seconds_total", seconds(v, 1e6))
		}
		if v, ok := st["system_usec"]; ok {
			e.add("container_cpu_system_seconds_total", seconds(v, 1e6))
		}
		throttling(e, st, "throttled_usec", 1e6)
		return
	}
	acct := func(name string) string { return cg.file("cpuacct", name) }
	if v, ok := readUint(acct("cpuacct.usage")); ok {
		e.add("container_cpu_usage_seconds_total", seconds(v, 1e9), "total")
	}
	user, uok := readUint(acct("cpuacct.usage_user"))
	sys, sok := readUint(acct("cpuacct.usage_sys"))
	if uok && sok {
		e.add("container_cpu_user_seconds_total", seconds(user, 1e9))
		e.add("container_cpu_system_seconds_total", seconds(sys, 1e9))
	} else if st, ok := readKeyed(acct("cpuacct.stat")); ok {
		// In USER_HZ ticks, which are 1/100 s on Linux.
		e.add("container_cpu_user_seconds_total", seconds(st["user"], 100))
		e.add("container_cpu_system_seconds_total", seconds(st["system"], 100))
	}
	if st, ok := readKeyed(cg.file("cpu", "cpu.stat")); ok {
		throttling(e, st, "throttled_time", 1e9)
	}
}

// throttling emits the CFS counters of a cpu.stat (v1 or v2).
func throttling(e *emitter, st map[string]uint64, timeKey string, perSecond uint64) {
	if v, ok := st["nr_periods"]; ok {
		e.add("container_cpu_cfs_periods_total", v)
	}
	if v, ok := st["nr_throttled"]; ok {
		e.add("container_cpu_cfs_throttled_periods_total", v)
	}
	if v, ok := st[timeKey]; ok {
		e.add("container_cpu_cfs_throttled_seconds_total", seconds(v, perSecond))
	}
}

// memory emits memory usage, its breakdown, limits hit, faults and OOM kills.
func (cg *cgroup) memory(e *emitter) {
	if cg.v2() {
		cg.memoryV2(e)
		return
	}
	mem := func(name string) string { return cg.file("memory", name) }
	usage, hasUsage := readUint(mem("memory.usage_in_bytes"))
	if hasUsage {
		e.add("container_memory_usage_bytes", usage)
	}
	if v, ok := readUint(mem("memory.max_usage_in_bytes")); ok {
		e.add("container_memory_max_usage_bytes", v)
	}
	if v, ok := readUint(mem("memory.failcnt")); ok {
		e.add("container_memory_failcnt", v)
	}
	if v, ok := readUint(mem("memory.kmem.usage_in_bytes")); ok {
		e.add("container_memory_kernel_usage", v)
	}
	if oc, ok := readKeyed(mem("memory.oom_control")); ok {
		if v, ok := oc["oom_kill"]; ok {
			e.add("container_oom_events_total", v)
		}
	}
	st, ok := readKeyed(mem("memory.stat"))
	if !ok {
		return
	}
	// With hierarchy accounting the total_ keys include the cgroup's children.
	stat := func(key string) (uint64, bool) {
		if v, ok := st["total_"+key]; ok {
			return v, true
		}
		v, ok := st[key]
		return v, ok
	}
	if v, ok := stat("rss"); ok {
		e.add("container_memory_rss", v)
	}
	if v, ok := stat("cache"); ok {
		e.add("container_memory_cache", v)
	}
	if v, ok := stat("mapped_file"); ok {
		e.add("container_memory_mapped_file", v)
	}
	if hasUsage {
		inactive, _ := stat("inactive_file")
		e.add("container_memory_working_set_bytes", usage-min(usage, inactive))
	}
	if memsw, ok := readUint(mem("memory.memsw.usage_in_bytes")); ok && hasUsage {
		e.add("container_memory_swap", memsw-min(memsw, usage))
	} else if v, ok := stat("swap"); ok {
		e.add("container_memory_swap", v)
	}
	faults(e, stat)
}

func (cg *cgroup) memoryV2(e *emitter) {
	mem := func(name string) string { return cg.file("memory", name) }
	usage, hasUsage := readUint(mem("memory.current"))
	if hasUsage {
		e.add("container_memory_usage_bytes", usage)
	}
	// memory.peak is Linux 5.19+ and memory.swap.current needs swap accounting:
	// without them cAdvisor reports 0, and so do we (critest wants every described
	// metric to have a value).
	peak, _ := readUint(mem("memory.peak"))
	e.add("container_memory_max_usage_bytes", peak)
	swap, _ := readUint(mem("memory.swap.current"))
	e.add("container_memory_swap", swap)
	if ev, ok := readKeyed(mem("memory.events")); ok {
		e.add("container_memory_failcnt", ev["max"])
		e.add("container_oom_events_total", ev["oom_kill"])
	}
	st, ok := readKeyed(mem("memory.stat"))
	if !ok {
		return
	}
	stat := func(key string) (uint64, bool) { v, ok := st[key]; return v, ok }
	if v, ok := stat("anon"); ok {
		e.add("container_memory_rss", v)
	}
	if v, ok := stat("file"); ok {
		e.add("container_memory_cache", v)
	}
	if v, ok := stat("file_mapped"); ok {
		e.add("container_memory_mapped_file", v)
	}
	if v, ok := stat("kernel"); ok { // Linux 5.18
		e.add("container_memory_kernel_usage", v)
	} else if v, ok := stat("kernel_stack"); ok {
		for _, k := range []string{"pagetables", "sec_pagetables", "percpu", "sock", "vmalloc", "slab"} {
			v += st[k]
		}
		e.add("container_memory_kernel_usage", v)
	}
	if hasUsage {
		e.add("container_memory_working_set_bytes", usage-min(usage, st["inactive_file"]))
	}
	faults(e, stat)
}

// faults emits page faults as cadvisor's memory failures: memory.stat counts them
// for the cgroup with its descendants, so the "container" and "hierarchy" scopes
// have the same values.
func faults(e *emitter, stat func(string) (uint64, bool)) {
	for _, kind := range []string{"pgfault", "pgmajfault"} {
		if v, ok := stat(kind); ok {
			e.add("container_memory_failures_total", v, kind, "container")
			e.add("container_memory_failures_total", v, kind, "hierarchy")
		}
	}
}

// pressure emits the total stall times of the cgroup's pressure files (cgroup v2 or
// the v2 hierarchy of a hybrid host, with PSI enabled).
func (cg *cgroup) pressure(e *emitter) {
	if cg.unified == "" {
		return
	}
	for _, res := range []string{"cpu", "memory", "io"} {
		some, full, ok := readPressure(filepath.Join(cg.unified, res+".pressure"))
		if !ok {
			continue
		}
		e.add("container_pressure_"+res+"_waiting_seconds_total", seconds(some, 1e6))
		e.add("container_pressure_"+res+"_stalled_seconds_total", seconds(full, 1e6))
	}
}

// readPressure returns the "total" (microseconds) of a pressure file's "some" and
// "full" lines; a missing "full" line (cpu before Linux 5.13) counts as zero.
func readPressure(path string) (some, full uint64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, kv := range f[1:] {
			v, found := strings.CutPrefix(kv, "total=")
			if !found {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				continue
			}
			switch f[0] {
			case "some":
				some, ok = n, true
			case "full":
				full = n
			}
		}
	}
	return some, full, ok
}

// procs returns the processes in the cgroup, false when they cannot be read.
func (cg *cgroup) procs() ([]int, bool) {
	var path string
	for _, ctrl := range []string{"pids", "memory", "cpu", "cpuacct"} {
		if path = cg.file(ctrl, "cgroup.procs"); path != "" {
			break
		}
	}
	if path == "" {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// pidsMax returns the cgroup's task limit, 0 for none.
func (cg *cgroup) pidsMax() (uint64, bool) {
	b, err := os.ReadFile(cg.file("pids", "pids.max"))
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// ioCounters are one block device's cumulative IO.
type ioCounters struct {
	major, minor                         uint64
	readBytes, writeBytes, reads, writes uint64
}

// io returns the cgroup's block IO per device ("major:minor"), nil when unknown.
func (cg *cgroup) io() []ioCounters {
	byDev := map[string]*ioCounters{}
	var order []string
	get := func(dev string) *ioCounters {
		if c, ok := byDev[dev]; ok {
			return c
		}
		maj, mnr, ok := parseDev(dev)
		if !ok {
			return nil
		}
		c := &ioCounters{major: maj, minor: mnr}
		byDev[dev] = c
		order = append(order, dev)
		return c
	}
	if cg.v2() {
		// io.stat: "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0"
		b, err := os.ReadFile(cg.file("io", "io.stat"))
		if err != nil {
			return nil
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			c := get(f[0])
			if c == nil {
				continue
			}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					continue
				}
				switch k {
				case "rbytes":
					c.readBytes = n
				case "wbytes":
					c.writeBytes = n
				case "rios":
					c.reads = n
				case "wios":
					c.writes = n
				}
			}
		}
	} else {
		// "8:0 Read 4096" lines; the CFQ/BFQ files stay empty on most hosts, the
		// throttle ones (always accounted) are the fallback, as runc reads them.
		blkio := func(kind string) []string {
			for _, name := range []string{"blkio.io_" + kind + "_recursive", "blkio.throttle.io_" + kind + "_recursive"} {
				if lines := blkioLines(cg.file("blkio", name)); len(lines) > 0 {
					return lines
				}
			}
			return nil
		}
		for _, kind := range []string{"service_bytes", "serviced"} {
			for _, line := range blkio(kind) {
				f := strings.Fields(line)
				if len(f) != 3 {
					continue
				}
				c := get(f[0])
				n, err := strconv.ParseUint(f[2], 10, 64)
				if c == nil || err != nil {
					continue
				}
				switch {
				case kind == "service_bytes" && f[1] == "Read":
					c.readBytes = n
				case kind == "service_bytes" && f[1] == "Write":
					c.writeBytes = n
				case kind == "serviced" && f[1] == "Read":
					c.reads = n
				case kind == "serviced" && f[1] == "Write":
					c.writes = n
				}
			}
		}
	}
	out := make([]ioCounters, 0, len(order))
	for _, dev := range order {
		out = append(out, *byDev[dev])
	}
	return out
}

// blkioLines returns a v1 blkio file's device lines (not its "Total" line).
func blkioLines(path string) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, ":") {
			out = append(out, line)
		}
	}
	return out
}

func parseDev(s string) (major, minor uint64, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	major, err1 := strconv.ParseUint(a, 10, 64)
	minor, err2 := strconv.ParseUint(b, 10, 64)
	return major, minor, err1 == nil && err2 == nil
}

// readUint reads a file holding one unsigned number.
func readUint(path string) (uint64, bool) {
	if path == "" {
		return 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readKeyed reads a file of "key value" lines.
func readKeyed(path string) (map[string]uint64, bool) {
	if path == "" {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, true
}
