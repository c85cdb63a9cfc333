package docker

import (
	"testing"

	"github.com/docker/docker/api/types/container"
)

func TestStatsOfComputesWhatDockerStatsShows(t *testing.T) {
	var s container.StatsResponse
	s.PreCPUStats.CPUUsage.TotalUsage = 1_000_000_000
	s.PreCPUStats.SystemUsage = 100_000_000_000
	s.CPUStats.CPUUsage.TotalUsage = 1_500_000_000 // 0.5 s of CPU
	s.CPUStats.SystemUsage = 102_000_000_000       // 2 s of all CPUs' time
	s.CPUStats.OnlineCPUs = 2
	s.MemoryStats.Usage = 300 << 20
	s.MemoryStats.Limit = 4 << 30
	s.MemoryStats.Stats = map[string]uint64{"inactive_file": 100 << 20}
	s.PidsStats.Current = 9
	got := statsOf(s)
	if got.CPUPercent != 50 {
		t.Errorf("CPU %v%%, want 50%% (half a CPU)", got.CPUPercent)
	}
	if got.MemoryBytes != 200<<20 || got.MemoryLimitBytes != 4<<30 || got.Pids != 9 || got.ReadAt.IsZero() {
		t.Errorf("stats %+v, want 200 MiB of 4 GiB, 9 pids", got)
	}
}
