package containerd

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/containerd/containerd/archive"
	"github.com/containerd/containerd/content"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/continuity/fs"
	cerrdefs "github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// errNoOverlayDiff says that overlayDiff does not apply; the diff service
// does the work instead.
var errNoOverlayDiff = errors.New("the overlay upper directory cannot be read here")

// overlayDiff writes a tar of a container's own changes into the content
// store from its overlay upper directory, which holds exactly those
// changes (whiteouts for removed files, an opaque mark on a directory that
// was replaced), and from the image's layers (lower, mounted read-only
// here) only to tell a changed file from a new one. containerd's diff
// service compares the two whole trees instead, which for a large image
// takes seconds, all of them with the sandbox frozen. It needs sandboxd
// to see containerd's snapshot directories and to mount; otherwise, or
// when the kernel's overlay keeps changes elsewhere than in the upper
// directory (redirected directories, metadata-only copies), it returns
// errNoOverlayDiff before writing anything.
func (b *Backend) overlayDiff(lctx context.Context, lower, upper []mount.Mount, ref string) (ocispec.Descriptor, error) {
	if b.noOverlayDiff || len(upper) != 1 || upper[0].Type != "overlay" {
		return ocispec.Descriptor{}, errNoOverlayDiff
	}
	upperDir := ""
	for _, o := range upper[0].Options {
		switch {
		case strings.HasPrefix(o, "upperdir="):
			upperDir = strings.TrimPrefix(o, "upperdir=")
		case strings.HasPrefix(o, "redirect_dir="), strings.HasPrefix(o, "metacopy="), o == "userxattr":
			return ocispec.Descriptor{}, errNoOverlayDiff
		}
	}
	if upperDir == "" || overlayParam("redirect_dir") || overlayParam("metacopy") {
		return ocispec.Descriptor{}, errNoOverlayDiff
	}
	if st, err := os.Stat(upperDir); err != nil || !st.IsDir() {
		return ocispec.Descriptor{}, errNoOverlayDiff
	}
	var desc ocispec.Descriptor
	mounted := false
	err := b.withReadonlyMount(lower, func(lowerRoot string) error {
		mounted = true
		var err error
		desc, err = b.writeOverlayDiff(lctx, lowerRoot, upperDir, ref)
		return err
	})
	if err != nil && !mounted {
		b.log.Info("cannot mount an image's layers to read a container's changes; containerd's diff service reads them, more slowly", "err", err)
		return ocispec.Descriptor{}, errNoOverlayDiff
	}
	return desc, err
}

// writeOverlayDiff writes the changes in upperDir over lowerRoot as an
// uncompressed layer.
func (b *Backend) writeOverlayDiff(lctx context.Context, lowerRoot, upperDir, ref string) (ocispec.Descriptor, error) {
	cs := b.cli.ContentStore()
	cw, err := cs.Writer(lctx, content.WithRef(ref), content.WithDescriptor(ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer}))
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	committed := false
	defer func() {
		if !committed {
			cw.Close()
			_ = cs.Abort(context.WithoutCancel(lctx), ref)
		}
	}()
	tw := archive.NewChangeWriter(cw, upperDir)
	if err := fs.DiffDirChanges(lctx, lowerRoot, upperDir, fs.DiffSourceOverlayFS, tw.HandleChange); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := tw.Close(); err != nil {
		return ocispec.Descriptor{}, err
	}
	d := cw.Digest()
	if err := cw.Commit(lctx, 0, d); err != nil {
		if !cerrdefs.IsAlreadyExists(err) {
			return ocispec.Descriptor{}, err
		}
		cw.Close() // the same layer was written before: that one is used
	}
	committed = true
	info, err := cs.Info(lctx, d)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: d, Size: info.Size}, nil
}

// overlayParam reports whether the overlay module's boolean parameter
// name is on.
func overlayParam(name string) bool {
	v, err := os.ReadFile("/sys/module/overlay/parameters/" + name)
	return err == nil && strings.TrimSpace(string(v)) == "Y"
}
