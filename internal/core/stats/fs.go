package stats

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// filesystem emits the size and inodes of the filesystem holding the container's
// writable layer, and the layer's size when known, labelled with its device.
func (c *Collector) filesystem(e *emitter, t Target) {
	if t.FsPath == "" {
		return
	}
	path := filepath.Join(c.root, t.FsPath)
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return
	}
	var dev string
	var s unix.Stat_t
	if err := unix.Stat(path, &s); err == nil {
		dev = c.deviceName(uint64(unix.Major(s.Dev)), uint64(unix.Minor(s.Dev)))
	}
	e.add("container_fs_limit_bytes", st.Blocks*uint64(st.Bsize), dev)
	e.add("container_fs_inodes_total", st.Files, dev)
	e.add("container_fs_inodes_free", st.Ffree, dev)
	if t.WritableKnown {
		e.add("container_fs_usage_bytes", t.WritableBytes, dev)
	}
}

// blockIO emits the cgroup's block IO per device.
func (c *Collector) blockIO(e *emitter, io []ioCounters) {
	for _, d := range io {
		dev := c.deviceName(d.major, d.minor)
		major, minor := strconv.FormatUint(d.major, 10), strconv.FormatUint(d.minor, 10)
		e.add("container_fs_reads_bytes_total", d.readBytes, dev)
		e.add("container_fs_reads_total", d.reads, dev)
		e.add("container_fs_writes_bytes_total", d.writeBytes, dev)
		e.add("container_fs_writes_total", d.writes, dev)
		e.add("container_blkio_device_usage_total", d.readBytes, dev, major, minor, "Read")
		e.add("container_blkio_device_usage_total", d.writeBytes, dev, major, minor, "Write")
	}
}

// deviceName returns "/dev/<name>" of a block device from sysfs, else "major:minor"
// (filesystems without a block device, such as overlay or tmpfs, have none).
func (c *Collector) deviceName(major, minor uint64) string {
	id := strconv.FormatUint(major, 10) + ":" + strconv.FormatUint(minor, 10)
	b, err := os.ReadFile(filepath.Join(c.root, "sys", "dev", "block", id, "uevent"))
	if err != nil {
		return id
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "DEVNAME="); ok && name != "" {
			return "/dev/" + name
		}
	}
	return id
}
