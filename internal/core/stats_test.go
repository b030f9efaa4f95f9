package core

import (
	"os"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestSumStats(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	total := rtSample(1, t0.Add(time.Minute))
	sum(&total, rtSample(2, t0))                    // older sample keeps the time
	sum(&total, docker.ContainerStats{})            // a container that is not running
	sum(&total, rtSample(4, t0.Add(2*time.Minute))) // newer sample moves it
	want := rtSample(7, t0.Add(2*time.Minute))
	assert.DeepEqual(t, total, want)
}

func TestCPUAndMemoryUsage(t *testing.T) {
	at := time.Unix(1, 2)
	st := rtSample(2, at)
	svc := &Service{cpuRates: &cpuRates{}}
	cpu := svc.cpuUsage("c", st)
	assert.Equal(t, cpu.Timestamp, at.UnixNano())
	assert.Equal(t, cpu.UsageCoreNanoSeconds.Value, uint64(2000))
	assert.Equal(t, cpu.UsageNanoCores.Value, uint64(0), "a first sample")
	later := rtSample(2, at.Add(time.Second))
	later.CPUUsageNanos += 5e8
	assert.Equal(t, svc.cpuUsage("c", later).UsageNanoCores.Value, uint64(5e8), "half a core")
	mem := memoryUsage(st)
	assert.Equal(t, mem.Timestamp, at.UnixNano())
	assert.Equal(t, mem.WorkingSetBytes.Value, uint64(160))
	assert.Equal(t, mem.UsageBytes.Value, uint64(200))
	assert.Equal(t, mem.RssBytes.Value, uint64(100))
	assert.Equal(t, mem.PageFaults.Value, uint64(20))
	assert.Equal(t, mem.MajorPageFaults.Value, uint64(2))
}

func TestPodNetworkUsage(t *testing.T) {
	now := time.Now()
	usage, err := (&Service{}).podNetworkUsage(os.Getpid(), now)
	assert.NilError(t, err)
	assert.Equal(t, usage.Timestamp, now.UnixNano())
	for _, iface := range append(usage.Interfaces, usage.DefaultInterface) {
		if iface != nil {
			assert.Check(t, iface.Name != "lo", "loopback is not pod traffic")
			assert.Check(t, iface.RxBytes != nil && iface.TxBytes != nil)
		}
	}
	_, err = (&Service{}).podNetworkUsage(0x7ffffffe, now)
	assert.Check(t, err != nil)
}
