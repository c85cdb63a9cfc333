package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// ContainerMemory returns a container's memory use as `docker stats` shows
// it: the cgroup's usage less its inactive page cache (which the kernel
// drops first and which is no cost of an idle sandbox).
func ContainerMemory(ctx context.Context, cli *client.Client, id string) (int64, error) {
	r, err := cli.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("docker stats of %s: %w", id, err)
	}
	defer r.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&s); err != nil {
		return 0, fmt.Errorf("docker stats of %s is not readable: %w", id, err)
	}
	return MemoryInUse(s.MemoryStats), nil
}

// MemoryInUse is usage less inactive file cache, cgroup v2 ("inactive_file")
// or v1 ("total_inactive_file"), never below zero.
func MemoryInUse(m container.MemoryStats) int64 {
	cache, ok := m.Stats["inactive_file"]
	if !ok {
		cache = m.Stats["total_inactive_file"]
	}
	if cache > m.Usage {
		return 0
	}
	return int64(m.Usage - cache)
}
