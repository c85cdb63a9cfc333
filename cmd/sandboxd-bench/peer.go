package main

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// startPeer creates and starts a plain container of the benchmark's image,
// shaped like a sandbox (no network, an anonymous volume on /workspace) but
// with nothing of sandboxd in it: what `docker run -d` gives.
func startPeer(ctx context.Context, e *env) (string, error) {
	cfg := &container.Config{
		Image:      e.opts.image,
		Entrypoint: []string{"sleep", "infinity"},
		WorkingDir: "/workspace",
		Labels:     map[string]string{peerLabel: e.runID},
	}
	hc := &container.HostConfig{
		NetworkMode: "none",
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Target: "/workspace"}},
	}
	c, err := e.docker.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("a peer container cannot be created: %w", err)
	}
	if err := e.docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return c.ID, fmt.Errorf("the peer container cannot start: %w", err)
	}
	return c.ID, nil
}

func removePeer(ctx context.Context, e *env, id string) error {
	if err := e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		return fmt.Errorf("the peer container cannot be removed: %w", err)
	}
	return nil
}
