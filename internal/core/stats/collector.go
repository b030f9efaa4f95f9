package stats

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits are a container's resource limits as the engine reports them; zero means
// unset.
type Limits struct {
	// CPUPeriod and CPUQuota are the CFS period and quota in microseconds.
	CPUPeriod int64
	CPUQuota  int64
	// CPUShares is the relative CPU weight (cgroup v1 shares).
	CPUShares int64
	// MemoryLimit is the memory limit in bytes.
	MemoryLimit int64
	// MemorySwap is the memory plus swap limit in bytes (-1: unlimited).
	MemorySwap int64
}

// Target is one container (or a pod's sandbox container) to collect metrics of,
// with what the engine knows about it.
type Target struct {
	// ContainerID is the engine's container ID (label "id").
	ContainerID string
	// ContainerName is the container's name in its pod, "POD" for a pod's sandbox
	// (label "container").
	ContainerName string
	// Name is the engine's container name (label "name").
	Name string
	// Image is the image the container runs (label "image").
	Image string
	// PodName and PodNamespace identify the pod (labels "pod" and "namespace").
	PodName      string
	PodNamespace string
	// Pid is the container's init process on the host.
	Pid int
	// StartedAt is when the container started.
	StartedAt time.Time
	// Spec are the container's limits.
	Spec Limits
	// FsPath is a directory on the filesystem holding the container's writable layer
	// (the engine's data root); "" leaves out the filesystem metrics.
	FsPath string
	// WritableBytes is the size of the container's writable layer, reported as
	// container_fs_usage_bytes when WritableKnown.
	WritableBytes uint64
	WritableKnown bool
}

// Collector reads container metrics from /proc and the cgroup filesystem below a
// root directory. It keeps no state between collections.
type Collector struct {
	root  string
	types map[string]runtimeapi.MetricType
	// pureV2: the host mounts cgroup v2 alone at /sys/fs/cgroup (read once: a host does
	// not change its cgroup mode while it runs).
	pureV2 bool
}

// NewCollector returns a collector reading <root>/proc and <root>/sys ("/" on a node;
// a fake tree in tests).
func NewCollector(root string) *Collector {
	table := descriptorTable()
	types := make(map[string]runtimeapi.MetricType, len(table))
	for _, d := range table {
		types[d.name] = d.typ
	}
	_, err := os.Stat(filepath.Join(root, "sys", "fs", "cgroup", "cgroup.controllers"))
	return &Collector{root: root, types: types, pureV2: err == nil}
}

// Descriptors returns the descriptors of every metric the collector produces.
func (c *Collector) Descriptors() []*runtimeapi.MetricDescriptor { return Descriptors() }

// Collect returns the metrics of the container t: its cgroup's CPU, memory, pids,
// block IO and pressure, its processes' threads, file descriptors and sockets, its
// filesystem, limits and times. A file that cannot be read leaves its metrics out;
// an error wrapping NotFound means the container's process is gone.
func (c *Collector) Collect(t Target, now time.Time) ([]*runtimeapi.Metric, error) {
	if err := c.checkProcess(t); err != nil {
		return nil, err
	}
	e := c.emitter(t, now)
	cg, err := c.cgroupOf(t.Pid)
	if err != nil {
		return nil, err
	}
	cg.cpu(e)
	cg.memory(e)
	cg.pressure(e)
	c.processes(e, t.Pid, cg)
	c.blockIO(e, cg.io())
	c.filesystem(e, t)
	spec(e, t.Spec)
	if !t.StartedAt.IsZero() {
		e.add("container_start_time_seconds", nonNegative(t.StartedAt.Unix()))
	}
	e.add("container_last_seen", nonNegative(now.Unix()))
	return e.out, nil
}

// PodNetwork returns the interface counters of the network namespace of the pod
// whose sandbox container is t (every interface but the loopback). An error wrapping
// NotFound means the sandbox's process is gone.
func (c *Collector) PodNetwork(t Target, now time.Time) ([]*runtimeapi.Metric, error) {
	if err := c.checkProcess(t); err != nil {
		return nil, err
	}
	e := c.emitter(t, now)
	ifaces, err := c.Interfaces(t.Pid)
	if err != nil {
		return nil, err
	}
	for _, i := range ifaces {
		e.add("container_network_receive_bytes_total", i.RxBytes, i.Name)
		e.add("container_network_receive_packets_total", i.RxPackets, i.Name)
		e.add("container_network_receive_errors_total", i.RxErrors, i.Name)
		e.add("container_network_receive_packets_dropped_total", i.RxDropped, i.Name)
		e.add("container_network_transmit_bytes_total", i.TxBytes, i.Name)
		e.add("container_network_transmit_packets_total", i.TxPackets, i.Name)
		e.add("container_network_transmit_errors_total", i.TxErrors, i.Name)
		e.add("container_network_transmit_packets_dropped_total", i.TxDropped, i.Name)
	}
	return e.out, nil
}

// checkProcess returns NotFound when t's process is gone (or t has none).
func (c *Collector) checkProcess(t Target) error {
	if t.Pid <= 0 {
		return fmt.Errorf("container %s has no process: %w", t.ContainerID, cerrdefs.ErrNotFound)
	}
	if _, err := os.Stat(c.proc(t.Pid)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("process %d of container %s is gone: %w", t.Pid, t.ContainerID, cerrdefs.ErrNotFound)
		}
		return fmt.Errorf("process %d of container %s: %w", t.Pid, t.ContainerID, err)
	}
	return nil
}

// proc returns <root>/proc/<pid>/elem...
func (c *Collector) proc(pid int, elem ...string) string {
	return filepath.Join(append([]string{c.root, "proc", strconv.Itoa(pid)}, elem...)...)
}

// emitter builds one target's metrics.
type emitter struct {
	types map[string]runtimeapi.MetricType
	base  []string
	out   []*runtimeapi.Metric
}

func (c *Collector) emitter(t Target, now time.Time) *emitter {
	return &emitter{
		types: c.types,
		base:  []string{t.ContainerName, t.ContainerID, t.Image, t.Name, t.PodNamespace, t.PodName},
	}
}

// add appends metric name with value v, labelled with the target's labels and extra.
func (e *emitter) add(name string, v uint64, extra ...string) {
	typ, ok := e.types[name]
	if !ok {
		return // not a described metric: kubelet would drop it
	}
	labels := make([]string, 0, len(e.base)+len(extra))
	labels = append(labels, e.base...)
	labels = append(labels, extra...)
	e.out = append(e.out, &runtimeapi.Metric{
		// Timestamp 0: collected on demand, which kubelet exports without an explicit
		// timestamp (so Prometheus marks the series of removed containers stale).
		Name: name, MetricType: typ, LabelValues: labels,
		Value: &runtimeapi.UInt64Value{Value: v},
	})
}

// spec emits the container's limits.
func spec(e *emitter, l Limits) {
	if l.CPUQuota > 0 {
		period := l.CPUPeriod
		if period <= 0 {
			period = defaultCPUPeriod
		}
		e.add("container_spec_cpu_period", uint64(period))
		e.add("container_spec_cpu_quota", uint64(l.CPUQuota))
	}
	shares := l.CPUShares
	if shares <= 0 {
		shares = defaultCPUShares
	}
	e.add("container_spec_cpu_shares", uint64(shares))
	e.add("container_spec_memory_limit_bytes", nonNegative(l.MemoryLimit))
	e.add("container_spec_memory_swap_limit_bytes", nonNegative(l.MemorySwap))
}

// The kernel's defaults, which apply when the engine leaves a limit unset.
const (
	defaultCPUPeriod = 100000 // microseconds
	defaultCPUShares = 1024
)

func nonNegative(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// seconds converts a duration counted in units per second to whole seconds.
func seconds(v, perSecond uint64) uint64 { return v / perSecond }
