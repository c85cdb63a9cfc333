package docker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxd/sandboxd/sandbox"
)

var _ sandbox.StatsReader = (*Backend)(nil)

// Stats is one reading of the container's resource use: ContainerStats with
// stream=false, for which the engine samples twice about a second apart, so
// the CPU share is over that second.
func (b *Backend) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	c, err := b.inspect(ctx, id) // ours, of this deployment, and its real id
	if err != nil {
		return sandbox.Stats{}, err
	}
	resp, err := b.cli.ContainerStats(ctx, c.ID, false)
	if err != nil {
		return sandbox.Stats{}, engineErr("read the stats of sandbox "+id, err)
	}
	defer resp.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return sandbox.Stats{}, engineErr("decode the stats of sandbox "+id, err)
	}
	return statsOf(s), nil
}

// statsOf computes what `docker stats` shows: the CPU share between the
// two samples (100 per busy CPU) and the memory in use without the
// reclaimable page cache.
func statsOf(s container.StatsResponse) sandbox.Stats {
	out := sandbox.Stats{Pids: s.PidsStats.Current, MemoryLimitBytes: s.MemoryStats.Limit, ReadAt: s.Read}
	if out.ReadAt.IsZero() {
		out.ReadAt = time.Now()
	}
	cpu := float64(s.CPUStats.CPUUsage.TotalUsage) - float64(s.PreCPUStats.CPUUsage.TotalUsage)
	sys := float64(s.CPUStats.SystemUsage) - float64(s.PreCPUStats.SystemUsage)
	n := float64(s.CPUStats.OnlineCPUs)
	if n == 0 {
		n = float64(len(s.CPUStats.CPUUsage.PercpuUsage))
	}
	if cpu > 0 && sys > 0 && n > 0 {
		out.CPUPercent = cpu / sys * n * 100
	}
	used := s.MemoryStats.Usage
	cache := s.MemoryStats.Stats["inactive_file"] // cgroup v2
	if v, ok := s.MemoryStats.Stats["total_inactive_file"]; ok {
		cache = v // cgroup v1
	}
	if cache < used {
		used -= cache
	}
	out.MemoryBytes = used
	return out
}
