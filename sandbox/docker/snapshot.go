package docker

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A snapshot is three engine objects named after it: the image committed
// from the sandbox's container (its own file system changes), a volume
// holding a copy of its workspace, and a carrier container (made, never
// started) that mounts the volume and carries the snapshot's labels. The
// carrier is made last, so a snapshot is listed only once it is whole; the
// parts of one half-made when sandboxd died are removed by the next sweep.
const (
	// SnapshotPrefix names the carrier and the volume, followed by the
	// snapshot id; the image is SnapshotImage:{id}.
	SnapshotPrefix = "sandboxd-snap-"
	SnapshotImage  = "sandboxd-snapshot"
	// loaderPrefix names the container that fills a snapshot's volume, or
	// a new sandbox's workspace, before the carrier exists.
	loaderPrefix = "sandboxd-snaploader-"
	// LabelSnapshot is the snapshot id, on its carrier, image and loader.
	LabelSnapshot = "io.sandboxd.snapshot"
	// LabelSnapshotOf is the sandbox it was taken of, on its carrier.
	LabelSnapshotOf      = "io.sandboxd.snapshot-of"
	labelSnapshotName    = "io.sandboxd.snapshot-name"
	labelSnapshotSize    = "io.sandboxd.snapshot-size"
	labelSnapshotCreated = "io.sandboxd.snapshot-created"
	// partAge is how old a part without its carrier must be before a sweep
	// removes it: a snapshot being taken right now has one for a while.
	partAge = 10 * time.Minute
)

var _ sandbox.Snapshotter = (*Backend)(nil)

// Snapshot commits sandbox id's container and copies its workspace, with
// the container frozen throughout (a pause recorded as sandboxd's own, so
// a sandboxd that dies meanwhile leaves a sandbox the next call resumes).
func (b *Backend) Snapshot(ctx context.Context, id string, req sandbox.SnapshotRequest) (sandbox.Snapshot, error) {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	snapID := "snap-" + newID()
	created := time.Now().UTC()
	if c.State != nil && c.State.Running && !c.State.Paused {
		if err := b.record(ctx, PauseVolumePrefix, id); err != nil {
			return sandbox.Snapshot{}, err
		}
		if err := b.cli.ContainerPause(ctx, c.ID); err != nil {
			b.drop(context.WithoutCancel(ctx), PauseVolumePrefix, id)
			return sandbox.Snapshot{}, engineErr("freeze sandbox "+id+" for its snapshot", err)
		}
		defer func() {
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := b.cli.ContainerUnpause(tctx, c.ID); err != nil {
				b.log.Warn("cannot thaw a sandbox after its snapshot", "id", id, "err", err)
				return
			}
			b.drop(tctx, PauseVolumePrefix, id)
		}()
	}
	ok := false
	defer func() {
		if !ok {
			b.removeSnapshotParts(context.WithoutCancel(ctx), snapID)
		}
	}()
	// The image: the container's own changes. Its labels are the
	// container's with every sandboxd key emptied (an image's labels can
	// only be overridden), so a sandbox made from it carries none of its
	// source's.
	labels := map[string]string{LabelSnapshot: snapID, sandbox.LabelDeployment: b.dep.Name}
	if c.Config != nil {
		for k := range c.Config.Labels {
			if strings.HasPrefix(k, "io.sandboxd.") && labels[k] == "" {
				labels[k] = ""
			}
		}
	}
	labels[LabelSnapshot], labels[sandbox.LabelDeployment] = snapID, b.dep.Name
	ref := SnapshotImage + ":" + snapID
	if _, err := b.cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref, Pause: false, Config: &container.Config{Labels: labels}}); err != nil {
		return sandbox.Snapshot{}, engineErr("commit sandbox "+id+" for its snapshot", err)
	}
	// The workspace, into the snapshot's volume through a loader.
	n, err := b.copyWorkspace(ctx, c.ID, snapID, ref, SnapshotPrefix+snapID, "")
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	var rw int64
	if full, _, err := b.cli.ContainerInspectWithRaw(ctx, c.ID, true); err == nil && full.SizeRw != nil {
		rw = *full.SizeRw
	}
	info := infoOf(c)
	snap := sandbox.Snapshot{ID: snapID, Tenant: req.Tenant, Sandbox: info.ID, Conversation: info.Conversation, Name: req.Name,
		CreatedAt: created, SizeBytes: n + rw, Holds: sandbox.HoldsFilesystem}
	carrier := maps.Clone(labels)
	maps.Copy(carrier, map[string]string{
		LabelSnapshotOf: info.ID, sandbox.LabelTenant: req.Tenant, sandbox.LabelConversation: info.Conversation,
		labelSnapshotName: req.Name, labelSnapshotSize: strconv.FormatInt(snap.SizeBytes, 10),
		labelSnapshotCreated: created.Format(time.RFC3339Nano),
	})
	if _, err := b.cli.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: []string{"/bin/true"}, Labels: carrier},
		&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: SnapshotPrefix + snapID, Target: Workspace}}},
		nil, nil, SnapshotPrefix+snapID); err != nil {
		return sandbox.Snapshot{}, engineErr("record snapshot "+snapID, err)
	}
	ok = true
	return snap, nil
}

// copyWorkspace copies the workspace of container from into volume (a
// snapshot's) or into container to (a new sandbox's, not started yet),
// through a loader made from img when it is a volume, and returns the
// bytes copied. A paused or stopped container can be read.
func (b *Backend) copyWorkspace(ctx context.Context, from, snapID, img, volume, to string) (int64, error) {
	rc, _, err := b.cli.CopyFromContainer(ctx, from, Workspace)
	if err != nil {
		return 0, engineErr("read the workspace for snapshot "+snapID, err)
	}
	defer rc.Close()
	if to == "" {
		loader, err := b.cli.ContainerCreate(ctx, &container.Config{Image: img, Entrypoint: []string{"/bin/true"},
			Labels: map[string]string{LabelSnapshot: snapID, sandbox.LabelDeployment: b.dep.Name}},
			&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: Workspace}}},
			nil, nil, loaderPrefix+snapID)
		if err != nil {
			return 0, engineErr("make the loader of snapshot "+snapID, err)
		}
		defer b.cli.ContainerRemove(context.WithoutCancel(ctx), loader.ID, container.RemoveOptions{Force: true})
		to = loader.ID
	}
	cr := &countingReader{r: rc}
	// The archive's entries start with "workspace/": unpacked at the root
	// they land in the mounted workspace.
	if err := b.cli.CopyToContainer(ctx, to, "/", cr, container.CopyToContainerOptions{CopyUIDGID: true}); err != nil {
		return 0, engineErr("write the workspace of snapshot "+snapID, err)
	}
	return cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Snapshots lists the deployment's whole snapshots, and sweeps the parts
// of half-made ones.
func (b *Backend) Snapshots(ctx context.Context) ([]sandbox.Snapshot, error) {
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelSnapshot), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))})
	if err != nil {
		return nil, engineErr("list snapshots", err)
	}
	var out []sandbox.Snapshot
	whole := map[string]bool{}
	for _, c := range cs {
		id := c.Labels[LabelSnapshot]
		if len(c.Names) > 0 && strings.TrimPrefix(c.Names[0], "/") == SnapshotPrefix+id && c.Labels[LabelSnapshotOf] != "" {
			whole[id] = true
			out = append(out, snapshotOf(c.Labels))
		}
	}
	b.sweepParts(ctx, cs, whole)
	return out, nil
}

// SnapshotOf reads one whole snapshot.
func (b *Backend) SnapshotOf(ctx context.Context, snapID string) (sandbox.Snapshot, error) {
	notFound := errdefs.NotFound("snapshot %s does not exist; list your snapshots with GET /v1/snapshots", snapID)
	if !strings.HasPrefix(snapID, "snap-") || !validID(strings.TrimPrefix(snapID, "snap-")) {
		return sandbox.Snapshot{}, notFound
	}
	c, err := b.cli.ContainerInspect(ctx, SnapshotPrefix+snapID)
	switch {
	case cerrdefs.IsNotFound(err):
		return sandbox.Snapshot{}, notFound
	case err != nil:
		return sandbox.Snapshot{}, engineErr("read snapshot "+snapID, err)
	case c.Config == nil || c.Config.Labels[LabelSnapshot] != snapID || c.Config.Labels[sandbox.LabelDeployment] != b.dep.Name || c.Config.Labels[LabelSnapshotOf] == "":
		return sandbox.Snapshot{}, notFound
	}
	return snapshotOf(c.Config.Labels), nil
}

func snapshotOf(l map[string]string) sandbox.Snapshot {
	size, _ := strconv.ParseInt(l[labelSnapshotSize], 10, 64)
	return sandbox.Snapshot{ID: l[LabelSnapshot], Tenant: l[sandbox.LabelTenant], Sandbox: l[LabelSnapshotOf], Conversation: l[sandbox.LabelConversation],
		Name: l[labelSnapshotName], CreatedAt: parseTime(l[labelSnapshotCreated]), SizeBytes: size, Holds: sandbox.HoldsFilesystem}
}

// DeleteSnapshot removes a snapshot: carrier first (it is no longer
// listed), then its volume and its image. Sandboxes made from it keep
// their files: the engine keeps the image's layers while they use them.
func (b *Backend) DeleteSnapshot(ctx context.Context, snapID string) error {
	if _, err := b.SnapshotOf(ctx, snapID); err != nil {
		return err
	}
	return b.removeSnapshotParts(ctx, snapID)
}

func (b *Backend) removeSnapshotParts(ctx context.Context, snapID string) error {
	var first error
	for _, name := range []string{SnapshotPrefix + snapID, loaderPrefix + snapID} {
		if err := b.cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && first == nil {
			first = engineErr("remove snapshot "+snapID, err)
		}
	}
	if err := b.cli.VolumeRemove(ctx, SnapshotPrefix+snapID, true); err != nil && !cerrdefs.IsNotFound(err) && first == nil {
		first = engineErr("remove the workspace of snapshot "+snapID, err)
	}
	if _, err := b.cli.ImageRemove(ctx, SnapshotImage+":"+snapID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) && first == nil {
		first = engineErr("remove the image of snapshot "+snapID, err)
	}
	return first
}

// sweepParts removes the loaders, and the images without a carrier, of
// snapshots older than partAge that never became whole.
func (b *Backend) sweepParts(ctx context.Context, cs []container.Summary, whole map[string]bool) {
	for _, c := range cs {
		id := c.Labels[LabelSnapshot]
		// A sandbox made from a snapshot carries its image's label: not a part.
		if c.Labels[sandbox.LabelManaged] == "true" {
			continue
		}
		if !whole[id] && b.stale(time.Unix(c.Created, 0)) {
			_ = b.removeSnapshotParts(ctx, id)
		}
	}
	imgs, err := b.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelSnapshot), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))})
	if err != nil {
		return
	}
	for _, im := range imgs {
		id := im.Labels[LabelSnapshot]
		if id != "" && !whole[id] && b.stale(time.Unix(im.Created, 0)) {
			b.log.Info("removing the parts of a snapshot that was never finished", "snapshot", id)
			_ = b.removeSnapshotParts(ctx, id)
		}
	}
}

// fromSnapshot fills a new container's workspace from snapshot snapID.
func (b *Backend) fromSnapshot(ctx context.Context, cid, snapID string) error {
	if _, err := b.copyWorkspace(ctx, SnapshotPrefix+snapID, snapID, "", "", cid); err != nil {
		return fmt.Errorf("copy the workspace of snapshot %s: %w", snapID, err)
	}
	return nil
}

// stale reports whether a part made at t cannot belong to a snapshot being
// taken: made before this backend started (by a sandboxd that died), or
// longer ago than partAge.
func (b *Backend) stale(t time.Time) bool {
	return t.Before(b.started.Add(-time.Second)) || time.Since(t) > partAge
}

// MakingPrefix names a sandbox's container until it runs (Create).
const MakingPrefix = "sandboxd-making-"

// sweepMaking removes a container left half-made by a sandboxd that died
// in Create (one being made now is left alone).
func (b *Backend) sweepMaking(ctx context.Context, c container.Summary) {
	if !b.stale(time.Unix(c.Created, 0)) {
		return
	}
	b.log.Info("removing a sandbox container that was never finished", "container", c.ID)
	if err := b.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		b.log.Warn("cannot remove a half-made sandbox container", "container", c.ID, "err", err)
	}
}
