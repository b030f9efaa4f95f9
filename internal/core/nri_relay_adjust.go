package core

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	nriapi "github.com/containerd/nri/pkg/api"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// adjustSpec returns spec with the NRI plugins' merged adjustment applied: the
// engine's container config as the plugins want it. What Docker Engine cannot
// express is refused as a whole (FailedPrecondition, naming each such adjustment)
// rather than dropped; the NRI table of docs/compatibility.md lists both.
func adjustSpec(spec docker.ContainerSpec, adj *nriapi.ContainerAdjustment) (docker.ContainerSpec, error) {
	if adj == nil {
		return spec, nil
	}
	out := cloneSpec(spec)
	var refused []string
	refuse := func(what, why string) { refused = append(refused, what+" ("+why+")") }

	for k, v := range adj.GetAnnotations() {
		if key, del := nriapi.IsMarkedForRemoval(k); del {
			delete(out.Labels, annotationPrefix+key)
		} else {
			out.Labels[annotationPrefix+k] = v
		}
	}
	for _, kv := range adj.GetEnv() {
		key, del := kv.IsMarkedForRemoval()
		out.Env = slices.DeleteFunc(out.Env, func(e string) bool { return e == key || strings.HasPrefix(e, key+"=") })
		if !del {
			out.Env = append(out.Env, kv.GetKey()+"="+kv.GetValue())
		}
	}
	for _, m := range adj.GetMounts() {
		dest, del := m.IsMarkedForRemoval()
		out.Mounts = slices.DeleteFunc(out.Mounts, func(x docker.Mount) bool { return x.Target == dest })
		if del {
			continue
		}
		dm, err := engineMount(m)
		if err != nil {
			refuse("mounts["+m.GetDestination()+"]", err.Error())
			continue
		}
		out.Mounts = append(out.Mounts, dm)
	}
	if h := adj.GetHooks(); h != nil && len(h.GetPrestart())+len(h.GetCreateRuntime())+len(h.GetCreateContainer())+
		len(h.GetStartContainer())+len(h.GetPoststart())+len(h.GetPoststop()) > 0 {
		refuse("hooks", "Docker Engine runs no OCI hooks")
	}
	for _, r := range adj.GetRlimits() {
		name := strings.ToLower(strings.TrimPrefix(r.GetType(), "RLIMIT_"))
		out.Resources.Ulimits = slices.DeleteFunc(out.Resources.Ulimits, func(u docker.Ulimit) bool { return u.Name == name })
		out.Resources.Ulimits = append(out.Resources.Ulimits, docker.Ulimit{Name: name, Soft: rlimit(r.GetSoft()), Hard: rlimit(r.GetHard())})
	}
	for _, d := range adj.GetCDIDevices() {
		if !slices.Contains(out.CDIDevices, d.GetName()) {
			out.CDIDevices = append(out.CDIDevices, d.GetName())
		}
	}
	if args := adj.GetArgs(); len(args) > 0 {
		out.Entrypoint, out.Cmd = slices.Clone(args), []string{}
	}
	if lx := adj.GetLinux(); lx != nil {
		adjustLinux(&out, lx, refuse)
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return spec, fmt.Errorf("NRI plugins asked for what Docker Engine cannot express: %s: %w", strings.Join(refused, "; "), cerrdefs.ErrFailedPrecondition)
	}
	return out, nil
}

// adjustLinux applies the Linux part of an adjustment to out, refusing what the
// engine cannot express.
func adjustLinux(out *docker.ContainerSpec, lx *nriapi.LinuxContainerAdjustment, refuse func(what, why string)) {
	for _, d := range lx.GetDevices() {
		path, del := d.IsMarkedForRemoval()
		out.Devices = slices.DeleteFunc(out.Devices, func(x docker.Device) bool { return x.PathInContainer == path })
		if !del {
			// The engine makes the node from the host's device at the same path (its
			// type, numbers and mode).
			out.Devices = append(out.Devices, docker.Device{PathOnHost: d.GetPath(), PathInContainer: d.GetPath(), CgroupPermissions: "rwm"})
		}
	}
	if r := lx.GetResources(); r != nil {
		adjustResources(&out.Resources, r, "linux.resources.", refuse)
	}
	if lx.GetCgroupsPath() != "" {
		refuse("linux.cgroups_path", "the engine names each container's cgroup under the pod's cgroup parent")
	}
	if v := lx.GetOomScoreAdj(); v != nil {
		out.OomScoreAdj = int(v.GetValue())
	}
	for k, v := range lx.GetSysctl() {
		if key, del := nriapi.IsMarkedForRemoval(k); del {
			delete(out.Sysctls, key)
		} else {
			out.Sysctls[k] = v
		}
	}
	for what, set := range map[string]bool{
		"linux.io_priority":    lx.GetIoPriority() != nil,
		"linux.seccomp_policy": lx.GetSeccompPolicy() != nil,
		"linux.namespaces":     len(lx.GetNamespaces()) > 0,
		"linux.net_devices":    len(lx.GetNetDevices()) > 0,
		"linux.scheduler":      lx.GetScheduler() != nil,
		"linux.rdt":            lx.GetRdt() != nil,
		"linux.memory_policy":  lx.GetMemoryPolicy() != nil,
	} {
		if set {
			refuse(what, "the engine's container config has no such setting")
		}
	}
}

// adjustResources applies NRI resources to engine resources; prefix names them in
// refusals ("linux.resources.").
func adjustResources(out *docker.Resources, r *nriapi.LinuxResources, prefix string, refuse func(what, why string)) {
	if c := r.GetCpu(); c != nil {
		if v := c.GetShares(); v != nil {
			out.CPUShares = int64(min(v.GetValue(), math.MaxInt64))
		}
		if v := c.GetQuota(); v != nil {
			out.CPUQuota = v.GetValue()
		}
		if v := c.GetPeriod(); v != nil {
			out.CPUPeriod = int64(min(v.GetValue(), math.MaxInt64))
		}
		if c.GetCpus() != "" {
			out.CpusetCpus = c.GetCpus()
		}
		if c.GetMems() != "" {
			out.CpusetMems = c.GetMems()
		}
		if c.GetRealtimeRuntime() != nil || c.GetRealtimePeriod() != nil {
			refuse(prefix+"cpu.realtime_runtime/realtime_period", "the engine sets real-time CPU time per daemon, not per container config")
		}
	}
	if m := r.GetMemory(); m != nil {
		if v := m.GetLimit(); v != nil {
			out.MemoryLimit = v.GetValue()
		}
		if v := m.GetSwap(); v != nil {
			out.MemorySwap = v.GetValue()
		}
		for what, set := range map[string]bool{
			"memory.reservation": m.GetReservation() != nil, "memory.kernel": m.GetKernel() != nil,
			"memory.kernel_tcp": m.GetKernelTcp() != nil, "memory.swappiness": m.GetSwappiness() != nil,
			"memory.disable_oom_killer": m.GetDisableOomKiller() != nil, "memory.use_hierarchy": m.GetUseHierarchy() != nil,
		} {
			if set {
				refuse(prefix+what, "not among the resources this runtime gives the engine")
			}
		}
	}
	if p := r.GetPids(); p != nil {
		out.PidsLimit = p.GetLimit()
	}
	if len(r.GetHugepageLimits()) > 0 {
		refuse(prefix+"hugepage_limits", "the engine's container config has no hugepage limits")
	}
	if r.GetBlockioClass() != nil || r.GetRdtClass() != nil {
		refuse(prefix+"blockio_class/rdt_class", "the engine has no block I/O or RDT classes")
	}
	if len(r.GetUnified()) > 0 {
		refuse(prefix+"unified", "the engine takes no cgroup v2 unified key/values")
	}
	if len(r.GetDevices()) > 0 {
		refuse(prefix+"devices", "the engine's device cgroup rules come from its devices, not from rules")
	}
}

// engineMount translates an NRI bind mount; other mount types and options the
// engine's bind mounts lack are refused.
func engineMount(m *nriapi.Mount) (docker.Mount, error) {
	dm := docker.Mount{Source: m.GetSource(), Target: m.GetDestination()}
	if t := m.GetType(); t != "" && t != "bind" {
		return dm, fmt.Errorf("type %q: only bind mounts are taken", t)
	}
	for _, o := range m.GetOptions() {
		switch o {
		case "bind", "rbind", "rw", "rprivate", "private":
		case "ro":
			dm.ReadOnly = true
		case "rslave", "slave":
			dm.Propagation = "rslave"
		case "rshared", "shared":
			dm.Propagation = "rshared"
		default:
			return dm, fmt.Errorf("option %q: the engine's bind mounts have no such option", o)
		}
	}
	if !strings.HasPrefix(dm.Source, "/") || !strings.HasPrefix(dm.Target, "/") {
		return dm, fmt.Errorf("source %q and destination %q must be absolute paths", dm.Source, dm.Target)
	}
	return dm, nil
}

// rlimit is an NRI rlimit value as the engine's (-1: unlimited).
func rlimit(v uint64) int64 {
	if v > math.MaxInt64 {
		return -1
	}
	return int64(v)
}

// cloneSpec copies spec's maps and slices that adjustSpec changes.
func cloneSpec(spec docker.ContainerSpec) docker.ContainerSpec {
	out := spec
	out.Labels = maps.Clone(spec.Labels)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Sysctls = maps.Clone(spec.Sysctls)
	if out.Sysctls == nil {
		out.Sysctls = map[string]string{}
	}
	out.Env = slices.Clone(spec.Env)
	out.Mounts = slices.Clone(spec.Mounts)
	out.Devices = slices.Clone(spec.Devices)
	out.CDIDevices = slices.Clone(spec.CDIDevices)
	out.Entrypoint, out.Cmd = slices.Clone(spec.Entrypoint), slices.Clone(spec.Cmd)
	out.Resources.Ulimits = slices.Clone(spec.Resources.Ulimits)
	out.Resources.Unified = maps.Clone(spec.Resources.Unified)
	return out
}

// inPlace tells whether adjusted differs from spec only in resources the engine
// updates on a created container (CPU, cpuset, memory, pids): the plugins' adjustment
// is then applied by an update, the container created before their answer kept.
func inPlace(spec, adjusted docker.ContainerSpec) bool {
	a, b := spec, adjusted
	a.Resources, b.Resources = docker.Resources{}, docker.Resources{}
	if len(a.Sysctls) == 0 && len(b.Sysctls) == 0 {
		a.Sysctls, b.Sysctls = nil, nil
	}
	if len(a.Labels) == 0 && len(b.Labels) == 0 {
		a.Labels, b.Labels = nil, nil
	}
	return reflect.DeepEqual(a, b) &&
		reflect.DeepEqual(spec.Resources.Ulimits, adjusted.Resources.Ulimits) &&
		maps.Equal(spec.Resources.Unified, adjusted.Resources.Unified)
}
