package core

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// containerHost reads what a checkpoint takes from this host rather than from the
// engine, which does not serve it.
type containerHost interface {
	// spec returns the OCI runtime spec (config.json) of container id, whose init
	// process is pid.
	spec(pid int, id string) ([]byte, error)
	// root is the directory where pid's root filesystem shows.
	root(pid int) string
	// criu returns the criu binary runc would run, when this host has one.
	criu() (string, error)
}

// procHost finds a container's bundle through /proc: the init process's parent is
// its containerd shim, which runs in a bundle directory of the engine's containerd
// namespace (with one shim per pod, another container's of the pod), and the
// container's own bundle is that directory's sibling named by its ID.
type procHost struct{}

func (procHost) spec(pid int, id string) ([]byte, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("no process")
	}
	ppid, err := parentPid(pid)
	if err != nil {
		return nil, err
	}
	// Through the shim's cwd link, which the kernel resolves in the shim's mount
	// namespace (not cleaned: "/proc/N/cwd/.." is the bundle's parent, not /proc/N).
	return os.ReadFile(fmt.Sprintf("/proc/%d/cwd/../%s/config.json", ppid, filepath.Base(id)))
}

func (procHost) root(pid int) string { return fmt.Sprintf("/proc/%d/root", pid) }

func (procHost) criu() (string, error) { return exec.LookPath("criu") }

// parentPid reads pid's parent from /proc/<pid>/status.
func parentPid(pid int) (int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("PPid:")); ok {
			return strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no PPid", pid)
}
