package main

import (
	"github.com/sandboxd/sandboxd/config"
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

// poolImages is the closed set of the pool metrics' image label.
func poolImages(specs []sandbox.PoolSpec) []string {
	images := make([]string, 0, len(specs))
	for _, s := range specs {
		images = append(images, s.Image)
	}
	return images
}
