package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/api"
	apiclient "github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

const (
	// blobFile is the workspace's random bytes (random, so no layer of the
	// engine can compress them away).
	blobFile = "blob.bin"
	// fillTimeout bounds the shell command that writes the blob.
	fillTimeout = 300
)

// workspaceFigures are the snapshot and fork figures of one workspace size,
// on Docker.
type workspaceFigures struct {
	Bytes int64 // the random bytes in the workspace, the note aside
	// Snapshot is POST /v1/sandboxes/{id}/snapshots until 201.
	Snapshot []time.Duration
	// Fork is POST /v1/sandboxes/{id}/fork until 201, by copies asked.
	Fork map[int][]time.Duration
	// FirstCall is the first read on each copy, right after its fork;
	// FirstCallOne only the copies of forks into 1.
	FirstCall, FirstCallOne []time.Duration
	// SizeBytes is the size_bytes each snapshot answered with (those taken
	// on request and those the forks took).
	SizeBytes []int64
	// SnapDisk is what the engine holds per snapshot, CopyDisk per copy.
	SnapDisk, CopyDisk []diskUse
	// FSGrowth is how much the used space of Docker's data root grew over
	// each fork, by copies asked.
	FSGrowth map[int][]int64
}

// diskUse is the disk of one snapshot or copy, in bytes: Layer is the
// engine's layer (a snapshot's committed image layer plus its carrier's
// writable layer; a copy's writable layer), Volume the blocks of its
// workspace volume.
type diskUse struct{ Layer, Volume int64 }

// snapshotPlan is what measureSnapshots takes: the workspace sizes, the
// copies of each fork, and how many samples each row of a size takes.
type snapshotPlan struct {
	Sizes   []int64
	Copies  []int
	Samples func(size int64) int
}

// snapshotRun is one size's run: the Docker engine, the API, the source
// session and everything made, so it can be checked gone at the end.
type snapshotRun struct {
	cli     *client.Client
	c       *apiclient.Client
	src     *session
	out     *workspaceFigures
	root    string          // Docker's data root, whose used space is read
	snaps   map[string]bool // every snapshot made
	volumes map[string]bool // every copy's workspace volume
	seq     int             // names each fork's conversations
}

// measureSnapshots takes the snapshot and fork figures of each size in
// plan on the Docker sandboxd behind c: one source sandbox per size with
// the note and size random bytes in its workspace; its snapshots and
// forks, each deleted (untimed) before the next, and checked gone from the
// engine at the end.
func measureSnapshots(ctx context.Context, c *apiclient.Client, image string, plan snapshotPlan) ([]*workspaceFigures, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	info, err := cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("the Docker engine does not describe itself: %w", err)
	}
	// The largest fork holds the source's workspace, its snapshot's and
	// every copy's at once; one more is left for the rest of the machine.
	need := plan.Sizes[len(plan.Sizes)-1] * int64(plan.Copies[len(plan.Copies)-1]+3)
	if free, err := freeSpace(info.DockerRootDir); err != nil {
		return nil, err
	} else if free < need {
		return nil, fmt.Errorf("the Docker data root %s has %s free; the snapshots and forks need about %s at once; free some space and run again",
			info.DockerRootDir, diskSize(free), diskSize(need))
	}
	var all []*workspaceFigures
	for _, size := range plan.Sizes {
		r := &snapshotRun{cli: cli, c: c, root: info.DockerRootDir, snaps: map[string]bool{}, volumes: map[string]bool{},
			out: &workspaceFigures{Bytes: size, Fork: map[int][]time.Duration{}, FSGrowth: map[int][]int64{}}}
		all = append(all, r.out)
		if err := r.measure(ctx, image, plan.Copies, plan.Samples(size)); err != nil {
			return all, fmt.Errorf("a %s workspace: %w", sizeName(size), err)
		}
	}
	return all, nil
}

// measure runs one size: the source, n snapshots, n forks into each count
// of copies, and the check that nothing is left.
func (r *snapshotRun) measure(ctx context.Context, image string, copies []int, n int) error {
	conv := "snap-src-" + strconv.FormatInt(r.out.Bytes>>20, 10) + "m"
	src, err := openSession(ctx, r.c, api.CreateSandboxRequest{Conversation: conv, Image: image})
	if err != nil {
		return err
	}
	r.src = src
	out, err := src.call(ctx, "shell", map[string]any{
		"command":   fmt.Sprintf("head -c %d /dev/urandom > %s && echo size=$(stat -c %%s %s)", r.out.Bytes, blobFile, blobFile),
		"timeout_s": fillTimeout})
	if err != nil {
		return fmt.Errorf("writing %s: %w", blobFile, err)
	}
	if !wholeBlob(out, r.out.Bytes) {
		return fmt.Errorf("writing %d random bytes in sandbox %s answered %q", r.out.Bytes, src.sb.ID, out)
	}
	// The source's own volume is checked gone at the end too.
	if _, err := r.copyDisk(ctx, src.sb.ID); err != nil {
		return err
	}
	for i := range n {
		if err := r.snapshot(ctx); err != nil {
			return fmt.Errorf("snapshot %d: %w", i, err)
		}
	}
	for _, k := range copies {
		for i := range n {
			if err := r.fork(ctx, k); err != nil {
				return fmt.Errorf("fork %d into %d: %w", i, k, err)
			}
		}
	}
	if err := r.c.DeleteSandbox(ctx, src.sb.ID); err != nil {
		return err
	}
	return r.checkGone(ctx)
}

// snapshot times one POST /snapshots, reads its disk and deletes it.
func (r *snapshotRun) snapshot(ctx context.Context) error {
	start := time.Now()
	snap, err := r.c.CreateSnapshot(ctx, r.src.sb.ID, "lifecyclebench")
	d := time.Since(start)
	if err != nil {
		return err
	}
	r.snaps[snap.ID] = true
	r.out.Snapshot = append(r.out.Snapshot, d)
	if err := r.keepSnapshot(ctx, snap); err != nil {
		return err
	}
	return r.c.DeleteSnapshot(ctx, snap.ID)
}

// keepSnapshot checks a snapshot holds at least the workspace's bytes and
// records its size_bytes and what the engine holds for it.
func (r *snapshotRun) keepSnapshot(ctx context.Context, snap api.Snapshot) error {
	if snap.SizeBytes < r.out.Bytes {
		return fmt.Errorf("snapshot %s says it holds %d bytes; the workspace alone has %d", snap.ID, snap.SizeBytes, r.out.Bytes)
	}
	r.out.SizeBytes = append(r.out.SizeBytes, snap.SizeBytes)
	u, err := snapshotDisk(ctx, r.cli, snap.ID)
	if err != nil {
		return err
	}
	r.out.SnapDisk = append(r.out.SnapDisk, u)
	return nil
}

// fork times one fork into k copies, then the first read on each copy,
// checks each holds the blob, reads the disk of the copies and the fork's
// snapshot, and deletes them. Each copy's run is made before the fork, as
// the cold create's is: a run needs no sandbox.
func (r *snapshotRun) fork(ctx context.Context, k int) error {
	r.seq++
	convs := make([]string, k)
	runs := map[string]string{}
	for i := range convs {
		convs[i] = fmt.Sprintf("%s-f%d-c%d", r.src.sb.Conversation, r.seq, i)
		run, err := r.c.CreateRun(ctx, api.CreateRunRequest{Conversation: convs[i]})
		if err != nil {
			return fmt.Errorf("create a run for %s: %w", convs[i], err)
		}
		runs[convs[i]] = run.ID
	}
	before, err := usedSpace(r.root)
	if err != nil {
		return err
	}
	start := time.Now()
	fr, err := r.c.ForkSandbox(ctx, r.src.sb.ID, convs)
	d := time.Since(start)
	if fr.Snapshot.ID != "" {
		r.snaps[fr.Snapshot.ID] = true
	}
	if err != nil {
		return err
	}
	after, err := usedSpace(r.root)
	if err != nil {
		return err
	}
	if len(fr.Sandboxes) != k || len(fr.Failed) > 0 {
		return fmt.Errorf("the fork made %d copies of the %d asked; failed: %+v", len(fr.Sandboxes), k, fr.Failed)
	}
	r.out.Fork[k] = append(r.out.Fork[k], d)
	r.out.FSGrowth[k] = append(r.out.FSGrowth[k], after-before)
	var copies []*session
	for _, sb := range fr.Sandboxes {
		s := &session{c: r.c, sb: sb, run: runs[sb.Conversation]}
		if s.run == "" {
			return fmt.Errorf("the fork answered a copy of conversation %q, which was not asked", sb.Conversation)
		}
		copies = append(copies, s)
	}
	for _, s := range copies {
		d, err := s.timedRead(ctx)
		if err != nil {
			return fmt.Errorf("the first call on a copy: %w", err)
		}
		r.out.FirstCall = append(r.out.FirstCall, d)
		if k == 1 {
			r.out.FirstCallOne = append(r.out.FirstCallOne, d)
		}
	}
	for _, s := range copies {
		out, err := s.call(ctx, "shell", map[string]any{"command": "echo size=$(stat -c %s " + blobFile + ")"})
		if err != nil {
			return err
		}
		if !wholeBlob(out, r.out.Bytes) {
			return fmt.Errorf("copy %s has no whole %s: stat answered %q", s.sb.ID, blobFile, out)
		}
		u, err := r.copyDisk(ctx, s.sb.ID)
		if err != nil {
			return err
		}
		r.out.CopyDisk = append(r.out.CopyDisk, u)
	}
	if err := r.keepSnapshot(ctx, fr.Snapshot); err != nil {
		return err
	}
	for _, s := range copies {
		if err := r.c.DeleteSandbox(ctx, s.sb.ID); err != nil {
			return err
		}
		if err := r.c.DeleteRun(ctx, s.run); err != nil {
			return err
		}
	}
	return r.c.DeleteSnapshot(ctx, fr.Snapshot.ID)
}

var sizeLine = regexp.MustCompile(`size=([0-9]+)`)

// wholeBlob reads the size `echo size=$(stat -c %s blob.bin)` printed and
// says whether it is n.
func wholeBlob(out string, n int64) bool {
	m := sizeLine.FindStringSubmatch(out)
	return m != nil && m[1] == strconv.FormatInt(n, 10)
}

// copyDisk is a sandbox's writable layer (docker inspect --size, SizeRw)
// and the blocks of its workspace volume; it remembers the volume, to
// check it is removed with the sandbox.
func (r *snapshotRun) copyDisk(ctx context.Context, id string) (diskUse, error) {
	name := docker.NamePrefix + id
	c, _, err := r.cli.ContainerInspectWithRaw(ctx, name, true)
	if err != nil {
		return diskUse{}, fmt.Errorf("docker inspect of %s: %w", name, err)
	}
	var u diskUse
	if c.SizeRw != nil {
		u.Layer = *c.SizeRw
	}
	for _, m := range c.Mounts {
		if m.Destination != docker.Workspace {
			continue
		}
		if m.Name != "" {
			r.volumes[m.Name] = true
		}
		if u.Volume, err = blocksUnder(m.Source); err != nil {
			return diskUse{}, err
		}
	}
	if u.Volume == 0 {
		return diskUse{}, fmt.Errorf("sandbox %s has no workspace volume with files on the engine", id)
	}
	return u, nil
}

// snapshotDisk is what Docker holds for snapshot id (docs/DESIGN.md,
// "Snapshots and forks"): the layer its image adds to the sandbox's (the
// top entry of `docker history`), its carrier's writable layer, and the
// blocks of its workspace volume.
func snapshotDisk(ctx context.Context, cli *client.Client, id string) (diskUse, error) {
	var u diskUse
	ref := docker.SnapshotImage + ":" + id
	h, err := cli.ImageHistory(ctx, ref)
	if err != nil || len(h) == 0 {
		return u, fmt.Errorf("docker history of %s: %v", ref, err)
	}
	u.Layer = h[0].Size
	carrier, _, err := cli.ContainerInspectWithRaw(ctx, docker.SnapshotPrefix+id, true)
	if err != nil {
		return u, fmt.Errorf("docker inspect of the carrier of %s: %w", id, err)
	}
	if carrier.SizeRw != nil {
		u.Layer += *carrier.SizeRw
	}
	vol, err := cli.VolumeInspect(ctx, docker.SnapshotPrefix+id)
	if err != nil {
		return u, fmt.Errorf("docker volume inspect of the workspace of %s: %w", id, err)
	}
	if u.Volume, err = blocksUnder(vol.Mountpoint); err != nil {
		return u, err
	}
	return u, nil
}

// checkGone checks that sandboxd lists none of the snapshots made and the
// engine holds none of their images, carriers and volumes, nor the
// workspace volume of the source or any copy.
func (r *snapshotRun) checkGone(ctx context.Context) error {
	list, err := r.c.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	var left []string
	for _, s := range list {
		left = append(left, "snapshot "+s.ID+" (listed)")
	}
	for id := range r.snaps {
		if _, err := r.cli.ImageInspect(ctx, docker.SnapshotImage+":"+id); !cerrdefs.IsNotFound(err) {
			left = append(left, "image "+docker.SnapshotImage+":"+id)
		}
		if _, err := r.cli.ContainerInspect(ctx, docker.SnapshotPrefix+id); !cerrdefs.IsNotFound(err) {
			left = append(left, "carrier container "+docker.SnapshotPrefix+id)
		}
		if _, err := r.cli.VolumeInspect(ctx, docker.SnapshotPrefix+id); !cerrdefs.IsNotFound(err) {
			left = append(left, "volume "+docker.SnapshotPrefix+id)
		}
	}
	for v := range r.volumes {
		if _, err := r.cli.VolumeInspect(ctx, v); !cerrdefs.IsNotFound(err) {
			left = append(left, "the workspace volume "+v+" of the source or a copy")
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("after every snapshot and copy was deleted the engine still holds: %s", strings.Join(left, ", "))
	}
	return nil
}

// blocksUnder is the disk every regular file under dir takes (st_blocks),
// which for random bytes is their size.
func blocksUnder(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("the volume %s cannot be measured: %w", dir, err)
	}
	return total, nil
}

// usedSpace is the used space of the file system holding path.
func usedSpace(path string) (int64, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0, fmt.Errorf("the used space of %s cannot be read: %w", path, err)
	}
	return int64(s.Blocks-s.Bfree) * int64(s.Bsize), nil
}

// freeSpace is the space free to a non-root user on the file system
// holding path.
func freeSpace(path string) (int64, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0, fmt.Errorf("the free space of %s cannot be read: %w", path, err)
	}
	return int64(s.Bavail) * int64(s.Bsize), nil
}

// snapshotsOn says whether the sandboxd behind c takes snapshots, and if
// not, its sentence why.
func snapshotsOn(ctx context.Context, c *apiclient.Client) (bool, string, error) {
	_, err := c.ListSnapshots(ctx)
	switch {
	case err == nil:
		return true, "", nil
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return false, err.Error(), nil
	}
	return false, "", err
}
