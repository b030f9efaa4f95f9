//go:build linux

package docker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// killInContainer SIGKILLs process pid if it is a process of container id on this
// host. The engine may be remote (tcp://) or see another PID namespace, and a pid can
// be reused: the process is pinned with a pidfd, then checked to be in the
// container's cgroup, then signalled through the pidfd.
func (c *SDKClient) killInContainer(pid int, id string) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open exec process %d: %w", pid, err)
	}
	defer unix.Close(fd) // a pidfd has nothing to flush
	if !c.inContainer(pid, id) {
		return fmt.Errorf("exec process %d is not a process of container %s on this host; not killing it", pid, id)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill exec process %d: %w", pid, err)
	}
	return nil
}

// processInContainer tells whether process pid's cgroups (in /proc/<pid>/cgroup)
// name container id, as the engine's cgroup paths do ("/docker/<id>",
// "docker-<id>.scope") with either cgroup driver and version.
func processInContainer(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && cgroupsName(b, id)
}

// cgroupsName tells whether a /proc/<pid>/cgroup content names container id.
func cgroupsName(cgroups []byte, id string) bool {
	return len(id) >= 12 && bytes.Contains(cgroups, []byte(id))
}
