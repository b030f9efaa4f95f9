package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/stats"
)

// containerStats samples a container; a container that is not running gets its
// attributes only. With Deps.Metrics (the engine runs on this host) CPU and memory
// come from the container's cgroup, as kubelet's cadvisor reads them: no engine call
// once the container's pid is known. Where the cgroup cannot be read they come from
// the engine's stats.
func (s *Service) containerStats(ctx context.Context, c docker.Container, md *runtimeapi.ContainerMetadata) (*runtimeapi.ContainerStats, docker.ContainerStats, error) {
	labels, annotations := splitLabels(c.Labels)
	out := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: c.ID, Metadata: md, Labels: labels, Annotations: annotations,
	}}
	if c.State != docker.StateRunning {
		return out, docker.ContainerStats{}, nil
	}
	st, p, err := s.cgroupStats(ctx, c.ID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, st, err
		}
		s.logger(ctx).WithError(err).WithField("container", c.ID).Debug("container stats from the engine: its cgroup cannot be read here")
		if st, err = s.deps.Docker.ContainerStats(ctx, c.ID); err != nil {
			return nil, st, fmt.Errorf("stats of container %s: %w", c.ID, err)
		}
	}
	out.WritableLayer = s.writableLayer(ctx, c.ID, p, st.Timestamp)
	out.Cpu = s.cpuUsage(c.ID, st)
	out.Memory = memoryUsage(st)
	return out, st, nil
}

// errNoCgroup says that stats cannot be read from cgroups here (no Deps.Metrics).
var errNoCgroup = errors.New("no cgroup reader")

// proc is what stats remember of a running container: its init process, the
// writable layer the engine names (GraphDriver's UpperDir; "" on the containerd store)
// and its network mode (a sandbox's pod network counters are its namespace's).
type proc struct {
	pid      int
	upperDir string
	network  string
}

// cgroupStats reads running container id's usage from its cgroup: its pid from
// s.pids, else from an inspect (once more when the remembered one is no longer the
// container's). NotFound: the container is gone or stopped.
func (s *Service) cgroupStats(ctx context.Context, id string) (docker.ContainerStats, proc, error) {
	if s.deps.Metrics == nil {
		return docker.ContainerStats{}, proc{}, errNoCgroup
	}
	p, known := s.pids.get(id)
	for range 2 {
		if !known {
			d, err := s.deps.Docker.InspectContainer(ctx, id)
			if err != nil {
				return docker.ContainerStats{}, proc{}, fmt.Errorf("inspect container %s: %w", id, err)
			}
			if d.State != docker.StateRunning || d.Pid <= 0 {
				s.pids.forget(id)
				return docker.ContainerStats{}, proc{}, fmt.Errorf("container %s is not running: %w", id, cerrdefs.ErrNotFound)
			}
			p = proc{pid: d.Pid, upperDir: d.UpperDir, network: d.NetworkMode}
			s.pids.set(id, p)
		}
		u, err := s.deps.Metrics.Usage(p.pid, id, time.Now())
		if err == nil {
			return docker.ContainerStats{Timestamp: u.Timestamp, CPUUsageNanos: u.CPUUsageNanos, MemoryUsageBytes: u.MemoryUsageBytes,
				MemoryWorkingSetBytes: u.MemoryWorkingSetBytes, MemoryRSSBytes: u.MemoryRSSBytes, PageFaults: u.PageFaults,
				MajorPageFaults: u.MajorPageFaults, Pids: u.Pids}, p, nil
		}
		s.pids.forget(id)
		switch {
		case !cerrdefs.IsNotFound(err):
			return docker.ContainerStats{}, proc{}, err
		case !known:
			// The engine says it runs as pid, and pid is not in its cgroup here: the
			// engine is on another host (or in another pid namespace).
			return docker.ContainerStats{}, proc{}, fmt.Errorf("the process of running container %s is not on this host: %s", id, err.Error()) // not NotFound: the engine answers
		}
		known = false // restarted since, or the pid was reused: ask the engine
	}
	return docker.ContainerStats{}, proc{}, fmt.Errorf("container %s: no process in its cgroup", id)
}

// writableLayer reports the last background measurement of container id's writable
// layer (Deps.Layers), timestamped when it was taken, and asks for the next; nil
// before the first measurement, or when the container's process is not known here.
// Its filesystem is the engine's data root, as in ImageFsInfo (kubelet reads the
// capacity there).
func (s *Service) writableLayer(ctx context.Context, id string, p proc, now time.Time) *runtimeapi.FilesystemUsage {
	if s.deps.Layers == nil || p.pid <= 0 {
		return nil
	}
	m, ok := s.deps.Layers.Get(id, p.pid, p.upperDir, now)
	if !ok {
		return nil
	}
	u := &runtimeapi.FilesystemUsage{
		Timestamp:  m.Time.UnixNano(),
		UsedBytes:  &runtimeapi.UInt64Value{Value: m.Bytes},
		InodesUsed: &runtimeapi.UInt64Value{Value: m.Inodes},
	}
	if info, err := s.engineInfo(ctx); err == nil && info.DockerRootDir != "" {
		u.FsId = &runtimeapi.FilesystemIdentifier{Mountpoint: info.DockerRootDir}
	}
	return u
}

// leaveOut decides what err, met sampling one item (a container or a pod sandbox,
// kind, with id) of a stats list, does to the list. An item that vanished meanwhile
// (NotFound) or whose sampling failed is left out, logged, and true returned: one
// item's trouble must not fail the whole list, as kubelet then has no stats at all.
// It returns false, and the list fails with err, when the request itself has ended
// or the engine cannot be reached: then no item could be sampled, and an empty list
// would claim there is nothing to report.
func (s *Service) leaveOut(ctx context.Context, err error, kind, id string) bool {
	if ctx.Err() != nil || cerrdefs.IsUnavailable(err) {
		return false
	}
	log := s.logger(ctx).WithError(err).WithField(kind, id)
	if cerrdefs.IsNotFound(err) {
		log.Debug("leaving out the stats of a " + kind + " that is gone")
	} else {
		log.Warn("leaving out the stats of a " + kind + " that cannot be sampled")
	}
	return true
}

// cpuUsage is the CRI's CPU usage of container (or sandbox) id, sampled as st: the
// cumulative time and the rate since a kept sample (cpuRates).
func (s *Service) cpuUsage(id string, st docker.ContainerStats) *runtimeapi.CpuUsage {
	return &runtimeapi.CpuUsage{
		Timestamp:            st.Timestamp.UnixNano(),
		UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: st.CPUUsageNanos},
		UsageNanoCores:       &runtimeapi.UInt64Value{Value: s.cpuRates.rate(id, st.CPUUsageNanos, st.Timestamp)},
	}
}

func memoryUsage(st docker.ContainerStats) *runtimeapi.MemoryUsage {
	return &runtimeapi.MemoryUsage{
		Timestamp:       st.Timestamp.UnixNano(),
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: st.MemoryWorkingSetBytes},
		UsageBytes:      &runtimeapi.UInt64Value{Value: st.MemoryUsageBytes},
		RssBytes:        &runtimeapi.UInt64Value{Value: st.MemoryRSSBytes},
		PageFaults:      &runtimeapi.UInt64Value{Value: st.PageFaults},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: st.MajorPageFaults},
	}
}

// sum adds b's counters to a.
func sum(a *docker.ContainerStats, b docker.ContainerStats) {
	a.CPUUsageNanos += b.CPUUsageNanos
	a.MemoryUsageBytes += b.MemoryUsageBytes
	a.MemoryWorkingSetBytes += b.MemoryWorkingSetBytes
	a.MemoryRSSBytes += b.MemoryRSSBytes
	a.PageFaults += b.PageFaults
	a.MajorPageFaults += b.MajorPageFaults
	a.Pids += b.Pids
	if b.Timestamp.After(a.Timestamp) {
		a.Timestamp = b.Timestamp
	}
}

// podNetworkUsage reads the interface counters of a sandbox's network namespace
// from /proc/<pid>/net/dev (the engine knows nothing of interfaces CNI made); eth0,
// CNI's pod interface, is the default one.
func (s *Service) podNetworkUsage(pid int, now time.Time) (*runtimeapi.NetworkUsage, error) {
	var ifaces []stats.Interface
	if s.deps.Metrics != nil {
		var err error
		if ifaces, err = s.deps.Metrics.Interfaces(pid); err != nil {
			return nil, err
		}
	} else {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/dev")
		if err != nil {
			return nil, fmt.Errorf("read pod network counters: %w", err)
		}
		ifaces = stats.ParseNetDev(b)
	}
	usage := &runtimeapi.NetworkUsage{Timestamp: now.UnixNano()}
	for _, i := range ifaces {
		iface := &runtimeapi.NetworkInterfaceUsage{
			Name:     i.Name,
			RxBytes:  &runtimeapi.UInt64Value{Value: i.RxBytes},
			RxErrors: &runtimeapi.UInt64Value{Value: i.RxErrors},
			TxBytes:  &runtimeapi.UInt64Value{Value: i.TxBytes},
			TxErrors: &runtimeapi.UInt64Value{Value: i.TxErrors},
		}
		if i.Name == "eth0" || usage.DefaultInterface == nil {
			if usage.DefaultInterface != nil {
				usage.Interfaces = append(usage.Interfaces, usage.DefaultInterface)
			}
			usage.DefaultInterface = iface
			continue
		}
		usage.Interfaces = append(usage.Interfaces, iface)
	}
	return usage, nil
}
