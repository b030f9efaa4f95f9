package stats

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
	addStats(e, stat, [][2]string{{"rss", "container_memory_rss"}, {"cache", "container_memory_cache"}, {"mapped_file", "container_memory_mapped_file"}})
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

// addStats adds, for each {key, metric} of stats, metric with the value stat has
// for key, if any.
func addStats(e *emitter, stat func(string) (uint64, bool), stats [][2]string) {
	for _, km := range stats {
		if v, ok := stat(km[0]); ok {
			e.add(km[1], v)
		}
	}
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
	addStats(e, stat, [][2]string{{"anon", "container_memory_rss"}, {"file", "container_memory_cache"}, {"file_mapped", "container_memory_mapped_file"}})
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
