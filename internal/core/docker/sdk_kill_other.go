//go:build !linux

package docker

import "fmt"

// killInContainer refuses to signal process pid: without pidfds a pid cannot be
// pinned, so it could be another process by the time it is signalled.
func (c *SDKClient) killInContainer(pid int, id string) error {
	return fmt.Errorf("exec process %d of container %s: no pidfd on this OS; not killing it", pid, id)
}

// processInContainer tells no process apart without /proc/<pid>/cgroup: none is
// a container's.
func processInContainer(int, string) bool { return false }
