package stats

import (
	"os"
	"strconv"
	"strings"
)

// ioCounters are one block device's cumulative IO.
type ioCounters struct {
	major, minor                         uint64
	readBytes, writeBytes, reads, writes uint64
}

// io returns the cgroup's block IO per device ("major:minor"), nil when unknown.
func (cg *cgroup) io() []ioCounters {
	byDev := map[string]*ioCounters{}
	var order []string
	get := func(dev string) *ioCounters {
		if c, ok := byDev[dev]; ok {
			return c
		}
		maj, mnr, ok := parseDev(dev)
		if !ok {
			return nil
		}
		c := &ioCounters{major: maj, minor: mnr}
		byDev[dev] = c
		order = append(order, dev)
		return c
	}
	if cg.v2() {
		// io.stat: "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0"
		b, err := os.ReadFile(cg.file("io", "io.stat"))
		if err != nil {
			return nil
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			c := get(f[0])
			if c == nil {
				continue
			}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					continue
				}
				switch k {
				case "rbytes":
					c.readBytes = n
				case "wbytes":
					c.writeBytes = n
				case "rios":
					c.reads = n
				case "wios":
					c.writes = n
				}
			}
		}
	} else {
		// "8:0 Read 4096" lines; the CFQ/BFQ files stay empty on most hosts, the
		// throttle ones (always accounted) are the fallback, as runc reads them.
		blkio := func(kind string) []string {
			for _, name := range []string{"blkio.io_" + kind + "_recursive", "blkio.throttle.io_" + kind + "_recursive"} {
				if lines := blkioLines(cg.file("blkio", name)); len(lines) > 0 {
					return lines
				}
			}
			return nil
		}
		for _, kind := range []string{"service_bytes", "serviced"} {
			for _, line := range blkio(kind) {
				f := strings.Fields(line)
				if len(f) != 3 {
					continue
				}
				c := get(f[0])
				n, err := strconv.ParseUint(f[2], 10, 64)
				if c == nil || err != nil {
					continue
				}
				switch {
				case kind == "service_bytes" && f[1] == "Read":
					c.readBytes = n
				case kind == "service_bytes" && f[1] == "Write":
					c.writeBytes = n
				case kind == "serviced" && f[1] == "Read":
					c.reads = n
				case kind == "serviced" && f[1] == "Write":
					c.writes = n
				}
			}
		}
	}
	out := make([]ioCounters, 0, len(order))
	for _, dev := range order {
		out = append(out, *byDev[dev])
	}
	return out
}

// blkioLines returns a v1 blkio file's device lines (not its "Total" line).
func blkioLines(path string) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, ":") {
			out = append(out, line)
		}
	}
	return out
}

func parseDev(s string) (major, minor uint64, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	major, err1 := strconv.ParseUint(a, 10, 64)
	minor, err2 := strconv.ParseUint(b, 10, 64)
	return major, minor, err1 == nil && err2 == nil
}
