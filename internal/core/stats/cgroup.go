package stats

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
	b, err := c.procCgroup(pid)
	if err != nil {
		return nil, err
	}
	return c.parseCgroup(b), nil
}

// procCgroup reads /proc/<pid>/cgroup; NotFound when the process is gone.
func (c *Collector) procCgroup(pid int) ([]byte, error) {
	b, err := os.ReadFile(c.proc(pid, "cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("process %d is gone: %w", pid, cerrdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read cgroups of process %d: %w", pid, err)
	}
	return b, nil
}

// parseCgroup locates the cgroup directories of a /proc/<pid>/cgroup file's content b.
func (c *Collector) parseCgroup(b []byte) *cgroup {
	mnt := filepath.Join(c.root, "sys", "fs", "cgroup")
	pureV2 := c.pureV2
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
	return cg
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
