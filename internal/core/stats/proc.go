package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
)

// processes emits the counts of the cgroup's processes, their threads, open files
// and sockets, the task limit and the init process's soft limit on open files.
// Processes that exit meanwhile are not counted.
func (c *Collector) processes(e *emitter, pid int, cg *cgroup) {
	pids, ok := cg.procs()
	if ok {
		e.add("container_processes", uint64(len(pids)))
	} else {
		pids = []int{pid} // threads and files of the init process at least
	}
	var threads, fds, sockets uint64
	for _, p := range pids {
		if tasks, err := os.ReadDir(c.proc(p, "task")); err == nil {
			threads += uint64(len(tasks))
		}
		entries, err := os.ReadDir(c.proc(p, "fd"))
		if err != nil {
			continue
		}
		for _, ent := range entries {
			fds++
			if link, err := os.Readlink(c.proc(p, "fd", ent.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
				sockets++
			}
		}
	}
	if ok {
		e.add("container_threads", threads)
		e.add("container_file_descriptors", fds)
		e.add("container_sockets", sockets)
	}
	if v, ok := cg.pidsMax(); ok {
		e.add("container_threads_max", v)
	}
	if v, ok := c.openFilesSoftLimit(pid); ok {
		e.add("container_ulimits_soft", v, "max_open_files")
	}
}

// openFilesSoftLimit reads the soft "Max open files" of /proc/<pid>/limits; false
// when it is unlimited or unknown.
func (c *Collector) openFilesSoftLimit(pid int) (uint64, bool) {
	b, err := os.ReadFile(c.proc(pid, "limits"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, found := strings.CutPrefix(line, "Max open files")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		return v, err == nil
	}
	return 0, false
}

// Interface are one network interface's counters from /proc/<pid>/net/dev.
type Interface struct {
	Name                                    string
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// Interfaces reads the interfaces of process pid's network namespace (but the
// loopback); NotFound when the process is gone.
func (c *Collector) Interfaces(pid int) ([]Interface, error) {
	b, err := os.ReadFile(c.proc(pid, "net", "dev"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("process %d is gone: %w", pid, cerrdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read network counters of process %d: %w", pid, err)
	}
	return ParseNetDev(b), nil
}

// ParseNetDev parses the content of a /proc/<pid>/net/dev file: every interface but
// the loopback, in the file's order.
func ParseNetDev(b []byte) []Interface {
	var out []Interface
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "  eth0: rxbytes rxpackets errs drop fifo frame compressed multicast txbytes txpackets errs drop ..."
		name, rest, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 12 {
			continue
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
		out = append(out, Interface{
			Name:    name,
			RxBytes: n(0), RxPackets: n(1), RxErrors: n(2), RxDropped: n(3),
			TxBytes: n(8), TxPackets: n(9), TxErrors: n(10), TxDropped: n(11),
		})
	}
	return out
}
