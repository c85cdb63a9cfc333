package containerd

import (
	"context"
	"os"

	containerd "github.com/containerd/containerd"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// Remove kills and deletes the task (every process in the sandbox dies with
// its PID 1), deletes the container with its snapshot, and removes the
// workspace when it is the sandbox's own (a host workspace is never touched).
func (b *Backend) Remove(ctx context.Context, id string) error {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return err
	}
	return b.destroy(ctx, c, id)
}

// destroy removes container c of sandbox id, as Remove says.
func (b *Backend) destroy(ctx context.Context, c containerd.Container, id string) error {
	own := ""
	if s, err := c.Spec(ctx); err == nil {
		for _, m := range s.Mounts {
			if m.Destination == docker.Workspace && m.Source == b.workspaceDir(id) {
				own = m.Source
			}
		}
	}
	if err := b.stop(ctx, c, true); err != nil {
		return err
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("delete sandbox "+id, err)
	}
	if own != "" {
		if err := os.RemoveAll(own); err != nil {
			b.log.Warn("cannot remove the workspace of a removed sandbox", "sandbox", id, "dir", own, "err", err)
		}
	}
	return nil
}

// labelMaking marks a container Create has not finished (its time); such
// a container has no LabelManaged, so it is no sandbox yet.
const labelMaking = "io.sandboxd.making"

// sweepMaking removes the deployment's containers left half-made by a
// sandboxd that died in Create (one being made now is left alone), with
// their workspaces.
func (b *Backend) sweepMaking(ctx context.Context) {
	cs, err := b.cli.Containers(ctx, `labels."`+labelMaking+`",labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
	if err != nil {
		b.log.Warn("cannot list half-made sandbox containers", "err", err)
		return
	}
	for _, c := range cs {
		l, err := c.Labels(ctx)
		if err != nil || l[sandbox.LabelManaged] == "true" || l[labelMaking] == "" {
			continue
		}
		at := labelTime(l, labelMaking)
		if at.IsZero() || !b.stale(at) {
			continue
		}
		b.log.Info("removing a sandbox container that was never finished", "container", c.ID())
		if err := b.destroy(ctx, c, sandboxID(c.ID())); err != nil {
			b.log.Warn("cannot remove a half-made sandbox container", "container", c.ID(), "err", err)
		}
	}
}

// stop kills the task with SIGKILL and waits for it to exit; with del it
// also deletes the task. A missing task is already stopped.
func (b *Backend) stop(ctx context.Context, c containerd.Container, del bool) error {
	t, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return engineErr("find the task of sandbox "+sandboxID(c.ID()), err)
	}
	if del {
		if _, err := t.Delete(ctx, withProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			return engineErr("kill the task of sandbox "+sandboxID(c.ID()), err)
		}
		return nil
	}
	if err := withProcessKill(ctx, t); err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("kill the task of sandbox "+sandboxID(c.ID()), err)
	}
	return nil
}

// Stop kills the sandbox's task but keeps the container: the sandbox is then
// "stopped", as after a reboot of the host.
func (b *Backend) Stop(ctx context.Context, id string) error {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return err
	}
	return b.stop(ctx, c, false)
}
