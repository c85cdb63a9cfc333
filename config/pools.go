package config

import (
	"fmt"
	"strings"
)

// MaxPoolSize caps one pool: every warm sandbox holds its resources and an
// open agent pipe whether or not anyone claims it.
const MaxPoolSize = 64

// Pool is one warm pool: Size sandboxes of Image kept started and attached,
// so that creating a sandbox of that image (with the default resources,
// network, env and workspace) claims one instead of making one.
type Pool struct {
	Image string `yaml:"image"`
	Size  int    `yaml:"size"`
	// Backend, when set, limits the pool to a sandboxd running that
	// backend ("docker" or "kubernetes"), so one file can serve several.
	Backend string `yaml:"backend"`
}

// poolBackends are the backends that can claim a pool sandbox.
var poolBackends = map[string]bool{"docker": true, "kubernetes": true}

// validatePools checks the pools; its error names the entry and the fix.
func validatePools(pools []Pool) error {
	seen := map[string]int{}
	for i, p := range pools {
		switch {
		case strings.TrimSpace(p.Image) == "":
			return fmt.Errorf("pools[%d].image: is empty; name the image the pool keeps warm, e.g. sandboxd-sandbox:latest", i)
		case strings.TrimSpace(p.Image) != p.Image:
			return fmt.Errorf("pools[%d].image: %q has surrounding spaces; remove them", i, p.Image)
		case p.Size < 1 || p.Size > MaxPoolSize:
			return fmt.Errorf("pools[%d].size: %d is out of range (image %s); keep 1 to %d sandboxes warm, or remove the entry", i, p.Size, p.Image, MaxPoolSize)
		case p.Backend != "" && !poolBackends[p.Backend]:
			return fmt.Errorf("pools[%d].backend: %q has no warm pools (image %s); use docker or kubernetes, or leave backend out for the one sandboxd runs", i, p.Backend, p.Image)
		}
		key := p.Image + "\x00" + p.Backend
		if j, ok := seen[key]; ok {
			return fmt.Errorf("pools[%d].image: %s is pooled twice (also pools[%d]); give each image one entry per backend", i, p.Image, j)
		}
		seen[key] = i
	}
	return nil
}

// PoolsFor returns the pools that apply to a sandboxd running backend: those
// naming it, and those naming none unless one for the same image names it.
func (c *Config) PoolsFor(backend string) []Pool {
	named := map[string]bool{}
	for _, p := range c.Pools {
		if p.Backend == backend {
			named[p.Image] = true
		}
	}
	var out []Pool
	for _, p := range c.Pools {
		if p.Backend == backend || (p.Backend == "" && !named[p.Image]) {
			out = append(out, p)
		}
	}
	return out
}
