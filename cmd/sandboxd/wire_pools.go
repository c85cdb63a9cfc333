package main

import (
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/sandbox"
)

// poolSpecs are the configured warm pools that apply to backend.
func poolSpecs(cfg *config.Config, backend string) []sandbox.PoolSpec {
	var out []sandbox.PoolSpec
	for _, p := range cfg.PoolsFor(backend) {
		out = append(out, sandbox.PoolSpec{Image: p.Image, Size: p.Size})
	}
	return out
}

// poolMetrics exports the pools of specs, read from *mgr at scrape time
// (the metrics are registered before the manager exists).
func poolMetrics(specs []sandbox.PoolSpec, mgr **sandbox.Manager) metrics.Option {
	images := make([]string, 0, len(specs))
	for _, s := range specs {
		images = append(images, s.Image)
	}
	return metrics.WithPools(images, func() []sandbox.PoolStat {
		if *mgr == nil {
			return nil
		}
		return (*mgr).PoolStats()
	})
}
