package stats

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// tree writes files (path relative to root -> content) below root.
func tree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		assert.NilError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		assert.NilError(t, os.WriteFile(full, []byte(content), 0o644))
	}
}

// fakeProcess makes /proc/<pid> with threads tasks and fds open files of which
// sockets are sockets.
func fakeProcess(t testing.TB, root string, pid, threads, fds, sockets int, cgroupFile string) {
	t.Helper()
	dir := filepath.Join(root, "proc", strconv.Itoa(pid))
	tree(t, dir, map[string]string{
		"cgroup": cgroupFile,
		"limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
			"Max cpu time              unlimited            unlimited            seconds   \n" +
			"Max open files            1048576              1048576              files     \n",
	})
	for i := range threads {
		assert.NilError(t, os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(pid+i)), 0o755))
	}
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
	for i := range fds {
		target := "/dev/null"
		if i < sockets {
			target = "socket:[" + strconv.Itoa(1000+i) + "]"
		}
		assert.NilError(t, os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(i))))
	}
}

const (
	v2Cgroup = "/system.slice/docker-abc.scope"
	netDev   = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0:  123456     789    1    2    0     0          0         0    65432     321    3    4    0     0       0          0
`
)

// v2Tree is a cgroup v2 host with one container (pids 100 and 101) in v2Cgroup.
func v2Tree(t testing.TB) string {
	root := t.TempDir()
	cg := "sys/fs/cgroup" + v2Cgroup + "/"
	tree(t, root, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
		cg + "cgroup.procs":                "100\n101\n",
		cg + "cpu.stat": "usage_usec 12500000\nuser_usec 8200000\nsystem_usec 4300000\n" +
			"core_sched.force_idle_usec 0\nnr_periods 40\nnr_throttled 7\nthrottled_usec 3100000\n" +
			"nr_bursts 0\nburst_usec 0\n",
		cg + "memory.current":      "52428800\n",
		cg + "memory.peak":         "62914560\n",
		cg + "memory.swap.current": "4096\n",
		cg + "memory.events":       "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
		cg + "memory.stat": "anon 20971520\nfile 26214400\nkernel 3145728\nkernel_stack 65536\n" +
			"pagetables 131072\nsock 0\nshmem 0\nfile_mapped 1048576\nfile_dirty 0\n" +
			"inactive_anon 0\nactive_anon 20971520\ninactive_file 10485760\nactive_file 15728640\n" +
			"pgfault 5000\npgmajfault 12\n",
		cg + "pids.current":        "3\n",
		cg + "pids.max":            "max\n",
		cg + "io.stat":             "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n",
		cg + "cpu.pressure":        "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1200000\n",
		cg + "memory.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		cg + "io.pressure":         "some avg10=0.00 avg60=0.00 avg300=0.00 total=3000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
		"sys/dev/block/8:0/uevent": "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n",
		"var/lib/docker/.keep":     "",
	})
	fakeProcess(t, root, 100, 2, 4, 1, "0::"+v2Cgroup+"\n")
	fakeProcess(t, root, 101, 1, 2, 1, "0::"+v2Cgroup+"\n")
	tree(t, root, map[string]string{"proc/100/net/dev": netDev})
	return root
}

// v1Tree is a cgroup v1 host (hybrid: PSI in the unified hierarchy) with one
// container (pids 200 and 201) in /docker/abc.
func v1Tree(t testing.TB) string {
	root := t.TempDir()
	c := func(ctrl string) string { return "sys/fs/cgroup/" + ctrl + "/docker/abc/" }
	tree(t, root, map[string]string{
		c("pids") + "cgroup.procs":                               "200\n201\n",
		c("pids") + "pids.max":                                   "4096\n",
		c("cpuacct") + "cpuacct.usage":                           "12500000000\n",
		c("cpuacct") + "cpuacct.stat":                            "user 820\nsystem 430\n",
		c("cpu") + "cpu.stat":                                    "nr_periods 40\nnr_throttled 7\nthrottled_time 3100000000\n",
		c("memory") + "memory.usage_in_bytes":                    "52428800\n",
		c("memory") + "memory.max_usage_in_bytes":                "62914560\n",
		c("memory") + "memory.memsw.usage_in_bytes":              "52432896\n",
		c("memory") + "memory.failcnt":                           "3\n",
		c("memory") + "memory.kmem.usage_in_bytes":               "3145728\n",
		c("memory") + "memory.oom_control":                       "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
		c("blkio") + "blkio.io_service_bytes_recursive":          "Total 0\n",
		c("blkio") + "blkio.throttle.io_service_bytes_recursive": "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 12288\n8:0 Async 0\n8:0 Total 12288\nTotal 12288\n",
		c("blkio") + "blkio.throttle.io_serviced_recursive":      "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 3\n",
		"sys/fs/cgroup/unified/docker/abc/cpu.pressure":          "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\n",
		"sys/dev/block/8:0/uevent":                               "MAJOR=8\nMINOR=0\nDEVNAME=sda\n",
		"var/lib/docker/.keep":                                   "",
		c("memory") + "memory.stat": "cache 1\nrss 2\nmapped_file 3\ninactive_file 4\npgfault 5\npgmajfault 6\n" +
			"total_cache 26214400\ntotal_rss 20971520\ntotal_mapped_file 1048576\ntotal_swap 4096\n" +
			"total_pgfault 5000\ntotal_pgmajfault 12\ntotal_inactive_file 10485760\n",
	})
	cgroups := "12:pids:/docker/abc\n11:blkio:/docker/abc\n4:memory:/docker/abc\n3:cpu:/docker/abc\n" +
		"2:cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n"
	fakeProcess(t, root, 200, 2, 4, 1, cgroups)
	fakeProcess(t, root, 201, 1, 2, 1, cgroups)
	return root
}

func testTarget(pid int) Target {
	return Target{
		ContainerID: "abc", ContainerName: "app", Name: "k8s_app_pod_ns_uid_0", Image: "busybox:1.36",
		PodName: "pod", PodNamespace: "ns", Pid: pid, StartedAt: time.Unix(1700000000, 0),
		Spec: Limits{
			CPUPeriod: 100000, CPUQuota: 20000, CPUShares: 1024,
			MemoryLimit: 64 << 20, MemorySwap: 64 << 20,
		},
		FsPath: "/var/lib/docker", WritableBytes: 40960, WritableKnown: true,
	}
}

// key names one metric value: its name and its labels after the base ones.
func key(m *runtimeapi.Metric) string {
	k := m.GetName()
	for _, l := range m.GetLabelValues()[len(baseLabelKeys()):] {
		k += "/" + l
	}
	return k
}

// checkShape checks every metric against its descriptor and returns the values by key.
func checkShape(t *testing.T, ms []*runtimeapi.Metric, now time.Time, base []string) map[string]uint64 {
	t.Helper()
	descs := map[string]*runtimeapi.MetricDescriptor{}
	for _, d := range Descriptors() {
		descs[d.GetName()] = d
	}
	out := map[string]uint64{}
	for _, m := range ms {
		d, ok := descs[m.GetName()]
		if !assert.Check(t, ok, "undescribed metric %s", m.GetName()) {
			continue
		}
		assert.Check(t, len(m.GetLabelValues()) == len(d.GetLabelKeys()), "%s: %v for keys %v", m.GetName(), m.GetLabelValues(), d.GetLabelKeys())
		assert.DeepEqual(t, m.GetLabelValues()[:len(baseLabelKeys())], base)
		assert.Check(t, m.GetTimestamp() == 0, "collected on demand: no timestamp")
		assert.Check(t, m.GetMetricType() == runtimeapi.MetricType_COUNTER || m.GetMetricType() == runtimeapi.MetricType_GAUGE)
		k := key(m)
		_, dup := out[k]
		assert.Check(t, !dup, "duplicate %s", k)
		out[k] = m.GetValue().GetValue()
	}
	return out
}

// wantContainerValues are what v2Tree and v1Tree hold (the same numbers).
func wantContainerValues(t *testing.T, root string) map[string]uint64 {
	st := statfs(t, root, "/var/lib/docker")
	return map[string]uint64{
		"container_cpu_usage_seconds_total/total":               12,
		"container_cpu_user_seconds_total":                      8,
		"container_cpu_system_seconds_total":                    4,
		"container_cpu_cfs_periods_total":                       40,
		"container_cpu_cfs_throttled_periods_total":             7,
		"container_cpu_cfs_throttled_seconds_total":             3,
		"container_memory_usage_bytes":                          52428800,
		"container_memory_max_usage_bytes":                      62914560,
		"container_memory_working_set_bytes":                    52428800 - 10485760,
		"container_memory_rss":                                  20971520,
		"container_memory_cache":                                26214400,
		"container_memory_mapped_file":                          1048576,
		"container_memory_kernel_usage":                         3145728,
		"container_memory_swap":                                 4096,
		"container_memory_failcnt":                              3,
		"container_oom_events_total":                            1,
		"container_memory_failures_total/pgfault/container":     5000,
		"container_memory_failures_total/pgfault/hierarchy":     5000,
		"container_memory_failures_total/pgmajfault/container":  12,
		"container_memory_failures_total/pgmajfault/hierarchy":  12,
		"container_processes":                                   2,
		"container_threads":                                     3,
		"container_file_descriptors":                            6,
		"container_sockets":                                     2,
		"container_ulimits_soft/max_open_files":                 1048576,
		"container_fs_reads_bytes_total/" + "/dev/sda":          4096,
		"container_fs_reads_total/" + "/dev/sda":                1,
		"container_fs_writes_bytes_total/" + "/dev/sda":         8192,
		"container_fs_writes_total/" + "/dev/sda":               2,
		"container_blkio_device_usage_total//dev/sda/8/0/Read":  4096,
		"container_blkio_device_usage_total//dev/sda/8/0/Write": 8192,
		"container_fs_limit_bytes/" + st.dev:                    st.size,
		"container_fs_inodes_total/" + st.dev:                   st.inodes,
		"container_fs_usage_bytes/" + st.dev:                    40960,
		"container_spec_cpu_period":                             100000,
		"container_spec_cpu_quota":                              20000,
		"container_spec_cpu_shares":                             1024,
		"container_spec_memory_limit_bytes":                     64 << 20,
		"container_spec_memory_swap_limit_bytes":                64 << 20,
		"container_start_time_seconds":                          1700000000,
		"container_last_seen":                                   1800000000,
		"container_pressure_cpu_waiting_seconds_total":          2,
	}
}

// fsStat is what the collector should report of the filesystem of path below root.
type fsStat struct {
	dev                string
	size, inodes, free uint64
}

func statfs(t *testing.T, root, path string) fsStat {
	t.Helper()
	full := filepath.Join(root, path)
	var st unix.Statfs_t
	assert.NilError(t, unix.Statfs(full, &st))
	var s unix.Stat_t
	assert.NilError(t, unix.Stat(full, &s))
	dev := NewCollector(root).deviceName(uint64(unix.Major(s.Dev)), uint64(unix.Minor(s.Dev)))
	return fsStat{dev: dev, size: st.Blocks * uint64(st.Bsize), inodes: st.Files, free: st.Ffree}
}

// withoutFreeInodes checks and removes the free inodes, which other tests change.
func withoutFreeInodes(t *testing.T, root string, got map[string]uint64) map[string]uint64 {
	t.Helper()
	k := "container_fs_inodes_free/" + statfs(t, root, "/var/lib/docker").dev
	v, ok := got[k]
	assert.Check(t, ok, "no %s", k)
	assert.Check(t, v <= got["container_fs_inodes_total/"+statfs(t, root, "/var/lib/docker").dev])
	delete(got, k)
	return got
}

var base = []string{"app", "abc", "busybox:1.36", "k8s_app_pod_ns_uid_0", "ns", "pod"}

// collectShaped collects the metrics of testTarget(pid) from the tree at root, checks
// their shape with checkShape and returns them with their values.
func collectShaped(t *testing.T, root string, pid int) ([]*runtimeapi.Metric, map[string]uint64) {
	t.Helper()
	now := time.Unix(1800000000, 0)
	ms, err := NewCollector(root).Collect(testTarget(pid), now)
	assert.NilError(t, err)
	return ms, checkShape(t, ms, now, base)
}

func TestCollectCgroupV2(t *testing.T) {
	root := v2Tree(t)
	ms, got := collectShaped(t, root, 100)
	want := wantContainerValues(t, root)
	want["container_threads_max"] = 0 // "max"
	want["container_pressure_cpu_stalled_seconds_total"] = 1
	want["container_pressure_memory_waiting_seconds_total"] = 0
	want["container_pressure_memory_stalled_seconds_total"] = 0
	want["container_pressure_io_waiting_seconds_total"] = 3
	want["container_pressure_io_stalled_seconds_total"] = 1
	assert.DeepEqual(t, withoutFreeInodes(t, root, got), want)

	// Every metric critest needs a value of is there (all but the unimplemented ones).
	names := map[string]bool{}
	for _, m := range ms {
		names[m.GetName()] = true
	}
	for _, name := range critestExpected {
		if !slices.Contains(critestUnimplemented, name) && !strings.HasPrefix(name, "container_network_") {
			assert.Check(t, names[name], "missing %s", name)
		}
	}
}

func TestCollectCgroupV1(t *testing.T) {
	root := v1Tree(t)
	_, got := collectShaped(t, root, 200)
	want := wantContainerValues(t, root)
	want["container_threads_max"] = 4096
	want["container_pressure_cpu_stalled_seconds_total"] = 0 // no "full" line
	assert.DeepEqual(t, withoutFreeInodes(t, root, got), want)
}

func TestCollectCgroupV1UserSystemInNanoseconds(t *testing.T) {
	root := v1Tree(t)
	tree(t, root, map[string]string{
		"sys/fs/cgroup/cpuacct/docker/abc/cpuacct.usage_user": "9000000000\n",
		"sys/fs/cgroup/cpuacct/docker/abc/cpuacct.usage_sys":  "3000000000\n",
	})
	ms, err := NewCollector(root).Collect(testTarget(200), time.Unix(1800000000, 0))
	assert.NilError(t, err)
	got := checkShape(t, ms, time.Unix(1800000000, 0), base)
	assert.Equal(t, got["container_cpu_user_seconds_total"], uint64(9))
	assert.Equal(t, got["container_cpu_system_seconds_total"], uint64(3))
}

func TestCollectSkipsWhatCannotBeRead(t *testing.T) {
	root := t.TempDir()
	tree(t, root, map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory\n"})
	// The cgroup directory is gone (or never readable): no cgroup metrics, no error.
	fakeProcess(t, root, 300, 1, 0, 0, "0::/gone\n")
	target := testTarget(300)
	target.FsPath = "/does/not/exist"
	target.Spec = Limits{}
	now := time.Unix(1800000000, 0)
	ms, err := NewCollector(root).Collect(target, now)
	assert.NilError(t, err)
	got := checkShape(t, ms, now, base)
	assert.DeepEqual(t, got, map[string]uint64{
		"container_ulimits_soft/max_open_files":  1048576,
		"container_spec_cpu_shares":              1024, // the kernel's default
		"container_spec_memory_limit_bytes":      0,
		"container_spec_memory_swap_limit_bytes": 0,
		"container_start_time_seconds":           1700000000,
		"container_last_seen":                    1800000000,
	})
}

func TestCollectV2WithoutOptionalFiles(t *testing.T) {
	root := v2Tree(t)
	cg := filepath.Join(root, "sys/fs/cgroup", v2Cgroup)
	for _, f := range []string{"memory.peak", "io.stat", "cpu.pressure", "memory.pressure", "io.pressure"} {
		assert.NilError(t, os.Remove(filepath.Join(cg, f)))
	}
	// Before Linux 5.18 there is no "kernel" key: its parts are summed.
	tree(t, cg, map[string]string{"memory.stat": "anon 1\nfile 2\nkernel_stack 10\npagetables 20\nslab 30\ninactive_file 0\n"})
	_, got := collectShaped(t, root, 100)
	assert.Equal(t, got["container_memory_kernel_usage"], uint64(60))
	// Without memory.peak (before Linux 5.19) the peak is 0, as cAdvisor reports it.
	assert.Equal(t, got["container_memory_max_usage_bytes"], uint64(0))
	for _, name := range []string{"container_fs_reads_total//dev/sda", "container_pressure_cpu_waiting_seconds_total"} {
		_, ok := got[name]
		assert.Check(t, !ok, name)
	}
}

func TestCollectGoneProcess(t *testing.T) {
	root := v2Tree(t)
	c := NewCollector(root)
	for _, pid := range []int{0, 999} {
		_, err := c.Collect(testTarget(pid), time.Now())
		assert.Check(t, cerrdefs.IsNotFound(err), "pid %d: %v", pid, err)
		_, err = c.PodNetwork(testTarget(pid), time.Now())
		assert.Check(t, cerrdefs.IsNotFound(err), "pid %d: %v", pid, err)
	}
}

func TestPodNetwork(t *testing.T) {
	root := v2Tree(t)
	now := time.Unix(1800000000, 0)
	target := Target{ContainerID: "sb", ContainerName: "POD", Name: "k8s_POD_pod_ns_uid_0", Image: "pause:3.10", PodName: "pod", PodNamespace: "ns", Pid: 100}
	ms, err := NewCollector(root).PodNetwork(target, now)
	assert.NilError(t, err)
	got := checkShape(t, ms, now, []string{"POD", "sb", "pause:3.10", "k8s_POD_pod_ns_uid_0", "ns", "pod"})
	assert.DeepEqual(t, got, map[string]uint64{
		"container_network_receive_bytes_total/eth0":            123456,
		"container_network_receive_packets_total/eth0":          789,
		"container_network_receive_errors_total/eth0":           1,
		"container_network_receive_packets_dropped_total/eth0":  2,
		"container_network_transmit_bytes_total/eth0":           65432,
		"container_network_transmit_packets_total/eth0":         321,
		"container_network_transmit_errors_total/eth0":          3,
		"container_network_transmit_packets_dropped_total/eth0": 4,
	})
}

// TestCollectSelf collects the test process's own cgroup on this machine.
func TestCollectSelf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading other processes' files needs root")
	}
	if _, err := os.Stat("/proc/self/cgroup"); err != nil {
		t.Skip("no /proc/self/cgroup")
	}
	now := time.Now()
	target := testTarget(os.Getpid())
	target.FsPath = os.TempDir()
	ms, err := NewCollector("/").Collect(target, now)
	assert.NilError(t, err)
	got := checkShape(t, ms, now, base)
	t.Logf("%d metrics from this machine's cgroup", len(got))
	assert.Check(t, got["container_last_seen"] == uint64(now.Unix()))
	assert.Check(t, got["container_fs_limit_bytes/"+statfs(t, "/", os.TempDir()).dev] > 0)
	if _, ok := got["container_processes"]; ok {
		assert.Check(t, got["container_threads"] >= 1)
		assert.Check(t, got["container_file_descriptors"] >= 1)
	}
	if v, ok := got["container_memory_usage_bytes"]; ok {
		assert.Check(t, v > 0)
	}
}
