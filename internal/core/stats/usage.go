package stats

import (
	"bytes"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// Usage is what the CRI's ContainerStats report of a container, read from its
// cgroup as cadvisor reads it.
type Usage struct {
	// Timestamp is when the files were read.
	Timestamp time.Time
	// CPUUsageNanos is the cumulative CPU time of the cgroup.
	CPUUsageNanos uint64
	// MemoryUsageBytes is the cgroup's memory use (memory.current or
	// memory.usage_in_bytes); MemoryWorkingSetBytes is that less inactive_file, as
	// cadvisor and kubelet's eviction manager compute it; MemoryRSSBytes is its
	// anonymous memory.
	MemoryUsageBytes, MemoryWorkingSetBytes, MemoryRSSBytes uint64
	// PageFaults and MajorPageFaults count the cgroup's page faults.
	PageFaults, MajorPageFaults uint64
	// Pids is the number of processes in the cgroup (0 without the pids controller).
	Pids uint64
}

// Usage reads the CPU and memory usage of container id from the cgroup of its init
// process pid, without asking the engine. It checks that pid is in a cgroup named
// after id (a pid the kernel gave to another process since is refused): an error
// wrapping NotFound means the process is gone or is not that container's (ask the
// engine for its pid again); any other error means the files cannot be read here
// (another host's engine, say).
func (c *Collector) Usage(pid int, id string, now time.Time) (Usage, error) {
	if pid <= 0 {
		return Usage{}, fmt.Errorf("container %s has no process: %w", id, cerrdefs.ErrNotFound)
	}
	b, err := c.procCgroup(pid)
	if err != nil {
		return Usage{}, err
	}
	if !bytes.Contains(b, []byte(id)) {
		return Usage{}, fmt.Errorf("process %d is not in a cgroup of container %s: %w", pid, id, cerrdefs.ErrNotFound)
	}
	cg := c.parseCgroup(b)
	u := Usage{Timestamp: now}
	if !cg.cpuUsage(&u) || !cg.memoryUsage(&u) {
		return Usage{}, fmt.Errorf("container %s: cgroup files of process %d not readable", id, pid)
	}
	u.Pids, _ = readUint(cg.file("pids", "pids.current"))
	return u, nil
}

// cpuUsage reads the cumulative CPU time; false when it cannot.
func (cg *cgroup) cpuUsage(u *Usage) bool {
	if cg.v2() {
		st, ok := readKeyed(cg.file("cpu", "cpu.stat"))
		v, has := st["usage_usec"]
		u.CPUUsageNanos = v * 1000
		return ok && has
	}
	v, ok := readUint(cg.file("cpuacct", "cpuacct.usage"))
	u.CPUUsageNanos = v
	return ok
}

// memoryUsage reads usage, working set, RSS and faults; false when it cannot.
func (cg *cgroup) memoryUsage(u *Usage) bool {
	mem := func(name string) string { return cg.file("memory", name) }
	usageFile, rssKey, prefix := "memory.usage_in_bytes", "rss", "total_"
	if cg.v2() {
		usageFile, rssKey, prefix = "memory.current", "anon", ""
	}
	usage, ok := readUint(mem(usageFile))
	if !ok {
		return false
	}
	st, ok := readKeyed(mem("memory.stat"))
	if !ok {
		return false
	}
	stat := func(key string) uint64 {
		if v, ok := st[prefix+key]; ok {
			return v
		}
		return st[key]
	}
	u.MemoryUsageBytes = usage
	u.MemoryWorkingSetBytes = usage - min(usage, stat("inactive_file"))
	u.MemoryRSSBytes = stat(rssKey)
	u.PageFaults, u.MajorPageFaults = stat("pgfault"), stat("pgmajfault")
	return true
}
