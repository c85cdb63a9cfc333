package containerd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/content"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/mount"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandboxd/sandboxd/errdefs"
)

// What a sandbox's container carries of the image it was made from: the
// target's digest as a reference containerd's collector follows, so that
// the image's manifest, config and layers stay while the sandbox exists
// (as Docker keeps an image its containers use), even once a new build
// took the image's name; and the target's media type, to read it again.
const (
	gcRefImage          = "containerd.io/gc.ref.content.sandboxd.image"
	labelImageMediaType = "io.sandboxd.image-media-type"
)

// imageLabels are the labels that tie a new container to img.
func imageLabels(img containerd.Image) map[string]string {
	t := img.Target()
	return map[string]string{gcRefImage: t.Digest.String(), labelImageMediaType: t.MediaType}
}

// baseImage is the image a sandbox's file system was made from: its
// manifest, its config (raw, so that a snapshot's copy of it keeps every
// field) and the chain id of its layers, the parent of the container's
// snapshot.
type baseImage struct {
	manifest ocispec.Manifest
	config   map[string]json.RawMessage
	diffIDs  []digest.Digest
	chain    string
}

// baseOf reads the image sandbox id was made from: the content its
// container refers to, or, for a container made before it did, the image
// of its name, if that still is the one under its snapshot.
func (b *Backend) baseOf(ctx context.Context, rec containers.Container, id string) (baseImage, error) {
	gone := errdefs.FailedPrecondition("the image sandbox %s was made from (%s) is no longer in containerd namespace %s (a new build took its name), so its own file system changes cannot be told apart from it and no snapshot can be taken; copy its files out instead",
		id, rec.Image, b.ns)
	cs := b.cli.ContentStore()
	var target ocispec.Descriptor
	if ref := rec.Labels[gcRefImage]; ref != "" {
		d, err := digest.Parse(ref)
		if err != nil {
			return baseImage{}, errdefs.Internal("sandbox %s names its image by %q, which is no digest", id, ref)
		}
		info, err := cs.Info(ctx, d)
		if cerrdefs.IsNotFound(err) {
			return baseImage{}, gone
		}
		if err != nil {
			return baseImage{}, engineErr("read the image of sandbox "+id, err)
		}
		target = ocispec.Descriptor{MediaType: rec.Labels[labelImageMediaType], Digest: d, Size: info.Size}
	} else {
		im, err := b.cli.ImageService().Get(ctx, rec.Image)
		if cerrdefs.IsNotFound(err) {
			return baseImage{}, gone
		}
		if err != nil {
			return baseImage{}, engineErr("read the image of sandbox "+id, err)
		}
		target = im.Target
	}
	plat := containerd.NewImage(b.cli, images.Image{Name: rec.Image, Target: target}).Platform()
	m, err := images.Manifest(ctx, cs, target, plat)
	if cerrdefs.IsNotFound(err) {
		return baseImage{}, gone
	}
	if err != nil {
		return baseImage{}, engineErr("read the manifest of the image of sandbox "+id, err)
	}
	raw, err := content.ReadBlob(ctx, cs, m.Config)
	if cerrdefs.IsNotFound(err) {
		return baseImage{}, gone
	}
	if err != nil {
		return baseImage{}, engineErr("read the config of the image of sandbox "+id, err)
	}
	var cfg ocispec.Image
	base := baseImage{manifest: m}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return baseImage{}, errdefs.Internal("the config of image %s cannot be read: %v", rec.Image, err)
	}
	if err := json.Unmarshal(raw, &base.config); err != nil {
		return baseImage{}, errdefs.Internal("the config of image %s cannot be read: %v", rec.Image, err)
	}
	base.diffIDs = cfg.RootFS.DiffIDs
	base.chain = identity.ChainID(base.diffIDs).String()
	st, err := b.cli.SnapshotService(rec.Snapshotter).Stat(ctx, rec.SnapshotKey)
	if err != nil {
		return baseImage{}, engineErr("read the file system of sandbox "+id, err)
	}
	if st.Parent != base.chain || len(base.diffIDs) != len(m.Layers) {
		return baseImage{}, gone
	}
	return base, nil
}

// buildImage writes the config and the manifest of a snapshot's image:
// base's, with layer added on top, and returns the manifest's descriptor.
// The manifest refers to its config and layers for the collector, as an
// imported image's does.
func (b *Backend) buildImage(lctx context.Context, base baseImage, layer ocispec.Descriptor, snapID string, created time.Time) (ocispec.Descriptor, error) {
	cfg := maps.Clone(base.config)
	var err error
	set := func(key string, v any) {
		if err == nil {
			cfg[key], err = json.Marshal(v)
		}
	}
	set("rootfs", ocispec.RootFS{Type: "layers", DiffIDs: append(slices.Clone(base.diffIDs), layer.Digest)})
	set("created", created)
	if h, ok := cfg["history"]; ok {
		var hist []ocispec.History
		if err = json.Unmarshal(h, &hist); err == nil {
			set("history", append(hist, ocispec.History{Created: &created, CreatedBy: "sandboxd snapshot " + snapID}))
		}
	}
	if err != nil {
		return ocispec.Descriptor{}, errdefs.Internal("the config of snapshot %s cannot be written: %v", snapID, err)
	}
	cfgDesc, err := b.writeJSON(lctx, snapID+"-config", base.manifest.Config.MediaType, cfg, nil)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	m := base.manifest
	m.Config = cfgDesc
	layer.MediaType = ocispec.MediaTypeImageLayer
	if m.MediaType == images.MediaTypeDockerSchema2Manifest {
		layer.MediaType = images.MediaTypeDockerSchema2Layer
	}
	layer.Annotations = nil
	m.Layers = append(slices.Clone(m.Layers), layer)
	refs := map[string]string{"containerd.io/gc.ref.content.config": cfgDesc.Digest.String()}
	for i, l := range m.Layers {
		refs["containerd.io/gc.ref.content.l."+strconv.Itoa(i)] = l.Digest.String()
	}
	mt := m.MediaType
	if mt == "" {
		mt = ocispec.MediaTypeImageManifest
	}
	return b.writeJSON(lctx, snapID+"-manifest", mt, m, refs)
}

// writeJSON writes v into the content store under the lease on lctx.
func (b *Backend) writeJSON(lctx context.Context, ref, mediaType string, v any, labels map[string]string) (ocispec.Descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, errdefs.Internal("%s cannot be encoded: %v", ref, err)
	}
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := content.WriteBlob(lctx, b.cli.ContentStore(), leasePrefix+ref, bytes.NewReader(data), d, content.WithLabels(labels)); err != nil {
		return ocispec.Descriptor{}, engineErr("write "+ref, err)
	}
	// A blob that existed already keeps the labels it had.
	if len(labels) > 0 {
		fields := make([]string, 0, len(labels))
		for k := range labels {
			fields = append(fields, "labels."+k)
		}
		if _, err := b.cli.ContentStore().Update(lctx, content.Info{Digest: d.Digest, Labels: labels}, fields...); err != nil {
			return ocispec.Descriptor{}, engineErr("label "+ref, err)
		}
	}
	if err := b.lease(lctx, d); err != nil {
		return ocispec.Descriptor{}, engineErr("keep "+ref, err)
	}
	return d, nil
}

// fillWorkspace unpacks snapshot im's workspace into ws (a new, empty
// directory) through the diff service, and gives ws the owner and mode
// the snapshot's workspace had.
func (b *Backend) fillWorkspace(ctx context.Context, im images.Image, ws string) error {
	snapID := im.Labels[LabelSnapshot]
	d, err := digest.Parse(im.Labels[labelWorkspaceTar])
	if err != nil {
		return errdefs.Internal("snapshot %s names its workspace by %q, which is no digest", snapID, im.Labels[labelWorkspaceTar])
	}
	info, err := b.cli.ContentStore().Info(ctx, d)
	if err != nil {
		return engineErr("find the workspace of snapshot "+snapID, err)
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: d, Size: info.Size}
	if _, err := b.cli.DiffService().Apply(ctx, desc, []mount.Mount{{Type: "bind", Source: ws, Options: []string{"rbind", "rw"}}}); err != nil {
		return engineErr("copy the workspace of snapshot "+snapID, err)
	}
	var uid, gid int
	var mode uint32
	if _, err := fmt.Sscanf(strings.ReplaceAll(im.Labels[labelWorkspaceRoot], ":", " "), "%d %d %o", &uid, &gid, &mode); err != nil {
		return nil // an unreadable label: the directory keeps the default
	}
	if err := os.Lchown(ws, uid, gid); err != nil {
		return errdefs.Internal("the workspace %s cannot be given its owner: %v", ws, err)
	}
	if err := os.Chmod(ws, os.FileMode(mode)&os.ModePerm); err != nil {
		return errdefs.Internal("the workspace %s cannot be given its mode: %v", ws, err)
	}
	return nil
}
