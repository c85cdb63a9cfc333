package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/diff"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/containerd/snapshots"
	cerrdefs "github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// A snapshot is an image in the backend's namespace, named
// SnapshotImage:{id}: the image the sandbox was made from with one layer
// more, the container's own file system changes (what the diff service
// finds between the container's snapshot and its image's), so that a
// sandbox is made from it as from any image: unpacked (the snapshotter
// prepares a snapshot over the image's layers and the diff service applies
// the new layer into it) and given a new snapshot over that. The image
// record also carries the snapshot's labels and a reference to a second
// blob in the content store, a tar of the workspace. Every part is made
// under a lease and the image record last: a snapshot is listed only once
// it is whole, and the parts of one half-made when sandboxd died are held
// only by its lease, which the next listing deletes (or which expires),
// after which containerd's garbage collector removes them.
const (
	// SnapshotImage names a snapshot's image, tagged with the snapshot id.
	SnapshotImage = "sandboxd-snapshot"
	// LabelSnapshot is the snapshot id, on its image and its lease.
	LabelSnapshot = docker.LabelSnapshot
	// LabelSnapshotOf is the sandbox it was taken of, on its image.
	LabelSnapshotOf      = docker.LabelSnapshotOf
	labelSnapshotName    = "io.sandboxd.snapshot-name"
	labelSnapshotSize    = "io.sandboxd.snapshot-size"
	labelSnapshotCreated = "io.sandboxd.snapshot-created"
	// labelWorkspaceTar is the digest of the workspace's tar and
	// labelWorkspaceRoot the owner and mode of the workspace directory
	// itself ("uid:gid:octal mode"), which the tar does not hold.
	labelWorkspaceTar  = "io.sandboxd.snapshot-workspace"
	labelWorkspaceRoot = "io.sandboxd.snapshot-workspace-root"
	// gcRefWorkspace keeps the workspace's tar while the image record
	// exists (containerd's collector follows such labels).
	gcRefWorkspace = "containerd.io/gc.ref.content.sandboxd.workspace"
	// leasePrefix names a snapshot's lease, followed by its id.
	leasePrefix = "sandboxd-snap-"
	// leaseExpiry is when containerd drops the lease of a snapshot that
	// was never finished, should no listing have deleted it before.
	leaseExpiry = time.Hour
	// partAge is how old the lease of an unfinished snapshot must be
	// before a listing removes it: one being taken right now has one.
	partAge = 10 * time.Minute
	// thawTimeout bounds the thaw after a snapshot, and the removal of a
	// failed one, whatever happened to the caller's context.
	thawTimeout = 30 * time.Second
)

var _ sandbox.Snapshotter = (*Backend)(nil)

// snapshotName is snapshot snapID's image name.
func snapshotName(snapID string) string { return normalize(SnapshotImage + ":" + snapID) }

// Snapshot takes sandbox id's own file system changes and a copy of its
// workspace, with its task frozen meanwhile by Pause (whose mark makes the
// Manager resume a sandbox left frozen by a sandboxd that died), and thawed
// as soon as both are read. A paused sandbox stays paused; a hibernated or
// stopped one has no process that could write.
func (b *Backend) Snapshot(ctx context.Context, id string, req sandbox.SnapshotRequest) (sandbox.Snapshot, error) {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	rec, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return sandbox.Snapshot{}, engineErr("read sandbox "+id, err)
	}
	ws, err := b.workspaceOf(ctx, c, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	base, err := b.baseOf(ctx, rec, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	snapID := "snap-" + newID()
	created := time.Now().UTC()
	ls := b.cli.LeasesService()
	lease, err := ls.Create(ctx, leases.WithID(leasePrefix+snapID), leases.WithExpiration(leaseExpiry),
		leases.WithLabels(map[string]string{LabelSnapshot: snapID, sandbox.LabelDeployment: b.dep.Name}))
	if err != nil {
		return sandbox.Snapshot{}, engineErr("take a lease for snapshot "+snapID, err)
	}
	ok := false
	defer func() {
		if !ok {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), thawTimeout)
			defer cancel()
			if err := b.removeSnapshotParts(cctx, snapID); err != nil {
				b.log.Warn("cannot remove the parts of a snapshot that failed; its lease expires by itself", "snapshot", snapID, "err", err)
			}
		}
	}()
	lctx := leases.WithLease(ctx, lease.ID)

	thaw, err := b.freeze(ctx, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	parts, err := b.capture(lctx, rec, base, ws, snapID)
	thaw()
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	target, err := b.buildImage(lctx, base, parts.layer, snapID, created)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	name := snapshotName(snapID)
	// Unpacked now, under the lease: every sandbox made from it starts
	// from the same committed snapshot, and a layer that cannot be applied
	// fails here rather than at the first fork.
	if err := containerd.NewImage(b.cli, images.Image{Name: name, Target: target}).Unpack(lctx, b.snapshotter); err != nil {
		return sandbox.Snapshot{}, engineErr("unpack snapshot "+snapID, err)
	}
	info, err := b.info(ctx, c)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	snap := sandbox.Snapshot{ID: snapID, Tenant: req.Tenant, Sandbox: info.ID, Conversation: info.Conversation, Name: req.Name,
		CreatedAt: created, SizeBytes: parts.layer.Size + parts.workspace.Size, Holds: sandbox.HoldsFilesystem}
	labels := map[string]string{
		LabelSnapshot: snapID, sandbox.LabelDeployment: b.dep.Name, LabelSnapshotOf: info.ID,
		sandbox.LabelTenant: req.Tenant, sandbox.LabelConversation: info.Conversation,
		labelSnapshotName: req.Name, labelSnapshotSize: strconv.FormatInt(snap.SizeBytes, 10),
		labelSnapshotCreated: created.Format(time.RFC3339Nano),
		labelWorkspaceTar:    parts.workspace.Digest.String(), gcRefWorkspace: parts.workspace.Digest.String(),
		labelWorkspaceRoot: parts.root,
	}
	// The record: from here the snapshot is whole and listed.
	if _, err := b.cli.ImageService().Create(ctx, images.Image{Name: name, Target: target, Labels: labels}); err != nil {
		return sandbox.Snapshot{}, engineErr("record snapshot "+snapID, err)
	}
	// The record holds every part from now on; they are checked once
	// more, in case the lease was lost meanwhile (another sandboxd's sweep
	// of a lease it took for one of a sandboxd that died).
	if err := b.checkParts(ctx, name, target, parts.layer, parts.workspace); err != nil {
		return sandbox.Snapshot{}, err
	}
	ok = true
	if err := ls.Delete(context.WithoutCancel(ctx), lease); err != nil && !cerrdefs.IsNotFound(err) {
		b.log.Warn("cannot release the lease of a finished snapshot; it expires by itself", "snapshot", snapID, "err", err)
	}
	return snap, nil
}

// checkParts reports an error unless every part of the snapshot recorded
// as image name is in containerd.
func (b *Backend) checkParts(ctx context.Context, name string, target ocispec.Descriptor, parts ...ocispec.Descriptor) error {
	cs := b.cli.ContentStore()
	for _, d := range append(parts, target) {
		if _, err := cs.Info(ctx, d.Digest); err != nil {
			return engineErr("keep the parts of "+name, err)
		}
	}
	unpacked, err := containerd.NewImage(b.cli, images.Image{Name: name, Target: target}).IsUnpacked(ctx, b.snapshotter)
	if err != nil {
		return engineErr("check the layers of "+name, err)
	}
	if !unpacked {
		return errdefs.Unavailable("the layers of %s were removed while it was made; take the snapshot again", name)
	}
	return nil
}

// freeze pauses sandbox id's running task for a snapshot and returns what
// thaws it. A task caught pausing is left to settle paused, as Pause does.
func (b *Backend) freeze(ctx context.Context, id string) (func(), error) {
	_, _, st, err := b.task(ctx, id)
	if err != nil {
		return nil, err
	}
	switch st.Status {
	case containerd.Running:
	case containerd.Pausing:
		return func() {}, b.Pause(ctx, id)
	default:
		return func() {}, nil
	}
	if err := b.Pause(ctx, id); err != nil {
		return nil, err
	}
	return func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), thawTimeout)
		defer cancel()
		if err := b.Unpause(tctx, id); err != nil {
			b.log.Warn("cannot thaw a sandbox after its snapshot; the next call resumes it", "sandbox", id, "err", err)
		}
	}, nil
}

// snapshotParts are what capture read of a sandbox.
type snapshotParts struct {
	layer     ocispec.Descriptor // its own file system changes
	workspace ocispec.Descriptor // its workspace, as a tar
	root      string             // labelWorkspaceRoot
}

// capture writes the container's own changes (its snapshot against a view
// of its image's layers: from its overlay upper directory, or else by
// containerd's diff service) and the workspace (the diff service's
// comparison of the directory with nothing) into the content store, both
// uncompressed: nothing is spent on compression while the sandbox is
// frozen.
func (b *Backend) capture(lctx context.Context, rec containers.Container, base baseImage, ws, snapID string) (snapshotParts, error) {
	sn := b.cli.SnapshotService(rec.Snapshotter)
	upper, err := sn.Mounts(lctx, rec.SnapshotKey)
	if err != nil {
		return snapshotParts{}, engineErr("mount the file system of snapshot "+snapID, err)
	}
	view := "sandboxd-snapview-" + snapID
	lower, err := sn.View(lctx, view, base.chain, snapshots.WithLabels(map[string]string{LabelSnapshot: snapID, sandbox.LabelDeployment: b.dep.Name}))
	if err != nil {
		return snapshotParts{}, engineErr("view the image of snapshot "+snapID, err)
	}
	defer func() {
		if err := sn.Remove(context.WithoutCancel(lctx), view); err != nil && !cerrdefs.IsNotFound(err) {
			b.log.Warn("cannot remove a snapshot's view of its image; the collector will", "snapshot", snapID, "err", err)
		}
	}()
	ds := b.cli.DiffService()
	var p snapshotParts
	ref := leasePrefix + snapID + "-rootfs"
	p.layer, err = b.overlayDiff(lctx, lower, upper, ref)
	if errors.Is(err, errNoOverlayDiff) {
		p.layer, err = ds.Compare(lctx, lower, upper, diff.WithMediaType(ocispec.MediaTypeImageLayer), diff.WithReference(ref))
	}
	if err != nil {
		return snapshotParts{}, engineErr("read the file system changes of snapshot "+snapID, err)
	}
	if p.workspace, err = ds.Compare(lctx, nil, []mount.Mount{{Type: "bind", Source: ws, Options: []string{"rbind", "ro"}}},
		diff.WithMediaType(ocispec.MediaTypeImageLayer), diff.WithReference(leasePrefix+snapID+"-workspace")); err != nil {
		return snapshotParts{}, engineErr("read the workspace of snapshot "+snapID, err)
	}
	// A blob that existed already (an identical workspace) is not the
	// lease's by its writing: it is added, so that nothing collects it
	// before the image record refers to it.
	for _, d := range []ocispec.Descriptor{p.layer, p.workspace} {
		if err := b.lease(lctx, d); err != nil {
			return snapshotParts{}, engineErr("keep the parts of snapshot "+snapID, err)
		}
	}
	st, err := os.Stat(ws)
	if err != nil {
		return snapshotParts{}, errdefs.Internal("the workspace %s of snapshot %s cannot be read: %v", ws, snapID, err)
	}
	uid, gid := 0, 0
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		uid, gid = int(s.Uid), int(s.Gid)
	}
	p.root = fmt.Sprintf("%d:%d:%o", uid, gid, st.Mode().Perm())
	return p, nil
}

// lease adds blob d to the lease on lctx.
func (b *Backend) lease(lctx context.Context, d ocispec.Descriptor) error {
	id, _ := leases.FromContext(lctx)
	return b.cli.LeasesService().AddResource(lctx, leases.Lease{ID: id}, leases.Resource{ID: d.Digest.String(), Type: "content"})
}

// workspaceOf is the host directory mounted at the sandbox's workspace.
func (b *Backend) workspaceOf(ctx context.Context, c containerd.Container, id string) (string, error) {
	s, err := c.Spec(ctx)
	if err != nil {
		return "", engineErr("read the spec of sandbox "+id, err)
	}
	for _, m := range s.Mounts {
		if m.Destination == docker.Workspace && m.Type == "bind" {
			return m.Source, nil
		}
	}
	return "", errdefs.FailedPrecondition("sandbox %s has no workspace directory mounted at %s, so no snapshot can be taken of it", id, docker.Workspace)
}

// Snapshots lists the deployment's whole snapshots, and removes the
// leases of unfinished ones.
func (b *Backend) Snapshots(ctx context.Context) ([]sandbox.Snapshot, error) {
	ctx = b.nsCtx(ctx)
	imgs, err := b.cli.ImageService().List(ctx, `labels."`+LabelSnapshot+`",labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
	if err != nil {
		return nil, engineErr("list snapshots", err)
	}
	var out []sandbox.Snapshot
	whole := map[string]bool{}
	for _, im := range imgs {
		if id := im.Labels[LabelSnapshot]; b.whole(im, id) {
			whole[id] = true
			out = append(out, snapshotOf(im.Labels))
		}
	}
	b.sweepParts(ctx, whole)
	return out, nil
}

// whole reports whether im is snapshot snapID's record.
func (b *Backend) whole(im images.Image, snapID string) bool {
	l := im.Labels
	return snapID != "" && im.Name == snapshotName(snapID) && l[LabelSnapshot] == snapID &&
		l[sandbox.LabelDeployment] == b.dep.Name && l[LabelSnapshotOf] != "" && l[labelWorkspaceTar] != ""
}

// SnapshotOf reads one whole snapshot.
func (b *Backend) SnapshotOf(ctx context.Context, snapID string) (sandbox.Snapshot, error) {
	im, err := b.snapshotRecord(b.nsCtx(ctx), snapID)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	return snapshotOf(im.Labels), nil
}

// snapshotRecord is snapshot snapID's image record; NotFound unless whole.
func (b *Backend) snapshotRecord(ctx context.Context, snapID string) (images.Image, error) {
	notFound := errdefs.NotFound("snapshot %s does not exist; list your snapshots with GET /v1/snapshots", snapID)
	if !strings.HasPrefix(snapID, "snap-") || !validID(strings.TrimPrefix(snapID, "snap-")) {
		return images.Image{}, notFound
	}
	im, err := b.cli.ImageService().Get(ctx, snapshotName(snapID))
	switch {
	case cerrdefs.IsNotFound(err):
		return images.Image{}, notFound
	case err != nil:
		return images.Image{}, engineErr("read snapshot "+snapID, err)
	case !b.whole(im, snapID):
		return images.Image{}, notFound
	}
	return im, nil
}

func snapshotOf(l map[string]string) sandbox.Snapshot {
	size, _ := strconv.ParseInt(l[labelSnapshotSize], 10, 64)
	return sandbox.Snapshot{ID: l[LabelSnapshot], Tenant: l[sandbox.LabelTenant], Sandbox: l[LabelSnapshotOf], Conversation: l[sandbox.LabelConversation],
		Name: l[labelSnapshotName], CreatedAt: labelTime(l, labelSnapshotCreated), SizeBytes: size, Holds: sandbox.HoldsFilesystem}
}

// DeleteSnapshot removes a snapshot's image record, after which the
// collector removes its blobs and unpacked layers. Sandboxes made from it
// keep their files: each container's snapshot keeps the layers under it,
// and its reference to the image it was made from keeps the blobs.
func (b *Backend) DeleteSnapshot(ctx context.Context, snapID string) error {
	if _, err := b.SnapshotOf(ctx, snapID); err != nil {
		return err
	}
	return b.removeSnapshotParts(b.nsCtx(ctx), snapID)
}

// removeSnapshotParts removes snapshot snapID's lease and image record,
// and waits for the collector to remove what nothing else refers to.
func (b *Backend) removeSnapshotParts(ctx context.Context, snapID string) error {
	ctx = b.nsCtx(ctx)
	var first error
	if err := b.cli.LeasesService().Delete(ctx, leases.Lease{ID: leasePrefix + snapID}); err != nil && !cerrdefs.IsNotFound(err) {
		first = engineErr("release the parts of snapshot "+snapID, err)
	}
	if err := b.cli.ImageService().Delete(ctx, snapshotName(snapID), images.SynchronousDelete()); err != nil && !cerrdefs.IsNotFound(err) && first == nil {
		first = engineErr("remove snapshot "+snapID, err)
	}
	return first
}

// sweepParts removes the leases of snapshots that never became whole, once
// they are stale.
func (b *Backend) sweepParts(ctx context.Context, whole map[string]bool) {
	ls, err := b.cli.LeasesService().List(ctx, `labels."`+LabelSnapshot+`",labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
	if err != nil {
		b.log.Warn("cannot list the leases of snapshots", "err", err)
		return
	}
	for _, l := range ls {
		id := l.Labels[LabelSnapshot]
		if l.ID != leasePrefix+id || whole[id] || !b.stale(l.CreatedAt) {
			continue
		}
		b.log.Info("removing the parts of a snapshot that was never finished", "snapshot", id)
		if err := b.removeSnapshotParts(ctx, id); err != nil {
			b.log.Warn("cannot remove the parts of an unfinished snapshot", "snapshot", id, "err", err)
		}
	}
}

// stale reports whether a part made at t cannot belong to something being
// made right now: made before this backend started (by a sandboxd that
// died), or longer ago than partAge. containerd keeps times to the
// nanosecond, on the same host's clock.
func (b *Backend) stale(t time.Time) bool {
	return t.Before(b.started) || time.Since(t) > partAge
}
