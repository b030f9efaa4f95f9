package docker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/docker/docker/api/types/container"
)

// ContainerStats takes one sample of a container's resource usage.
func (c *SDKClient) ContainerStats(ctx context.Context, id string) (ContainerStats, error) {
	op := "container stats " + id
	resp, err := c.api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return ContainerStats{}, classify(op, err)
	}
	defer resp.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return ContainerStats{}, classify(op, err)
	}
	return statsFromSDK(&s), nil
}

func statsFromSDK(s *container.StatsResponse) ContainerStats {
	mem := s.MemoryStats.Stats
	out := ContainerStats{
		Timestamp:        s.Read,
		CPUUsageNanos:    s.CPUStats.CPUUsage.TotalUsage,
		MemoryUsageBytes: s.MemoryStats.Usage,
		// cgroup v1 reports hierarchical totals with a "total_" prefix; v2 has no prefix
		// and calls anonymous memory "anon".
		MemoryRSSBytes:  firstStat(mem, "total_rss", "rss", "anon"),
		PageFaults:      firstStat(mem, "total_pgfault", "pgfault"),
		MajorPageFaults: firstStat(mem, "total_pgmajfault", "pgmajfault"),
		Pids:            s.PidsStats.Current,
	}
	if out.Timestamp.IsZero() {
		out.Timestamp = time.Now()
	}
	inactive := firstStat(mem, "total_inactive_file", "inactive_file")
	if out.MemoryUsageBytes > inactive {
		out.MemoryWorkingSetBytes = out.MemoryUsageBytes - inactive
	}
	if len(s.Networks) > 0 {
		out.Networks = make(map[string]NetworkStats, len(s.Networks))
		for name, n := range s.Networks {
			out.Networks[name] = NetworkStats{RxBytes: n.RxBytes, RxErrors: n.RxErrors, TxBytes: n.TxBytes, TxErrors: n.TxErrors}
		}
	}
	return out
}

// firstStat returns the value of the first of keys present in stats (0 if none is).
func firstStat(stats map[string]uint64, keys ...string) uint64 {
	for _, k := range keys {
		if v, ok := stats[k]; ok {
			return v
		}
	}
	return 0
}
