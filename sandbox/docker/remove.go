package docker

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// Remove force-removes the container with its anonymous volumes (the
// workspace unless it is a host directory, which is never touched) and,
// for a claimed pool sandbox, its claim record.
func (b *Backend) Remove(ctx context.Context, id string) error {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return err
	}
	err = b.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("remove sandbox "+id, err)
	}
	b.drop(ctx, PauseVolumePrefix, id)
	b.drop(ctx, HibernateVolumePrefix, id)
	b.dropExpiries(ctx, id)
	// After the container: a record without its container is an orphan
	// that List cleans up; a container without its record would look
	// unclaimed.
	return b.removeClaim(ctx, id, c)
}
