package containerd

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"

	containerd "github.com/containerd/containerd"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
)

// HasImage reports whether name (a Docker-style reference) is in the
// backend's namespace.
func (b *Backend) HasImage(ctx context.Context, name string) (bool, error) {
	_, err := b.cli.GetImage(b.nsCtx(ctx), normalize(name))
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, engineErr("look up image "+name, err)
}

// ImportFromDocker copies image name from the local Docker engine into the
// backend's namespace (`docker save` piped into containerd's importer) and
// unpacks it for the snapshotter. Nothing can be pulled on machines without
// a registry, so this is how the Docker-built default image reaches
// containerd; scripts/containerd-import.sh does the same with ctr.
func (b *Backend) ImportFromDocker(ctx context.Context, name string) error {
	// A lease keeps what the import and the unpack create from the garbage
	// collector until the image's config carries its snapshot reference.
	ctx, done, err := b.cli.WithLease(b.nsCtx(ctx))
	if err != nil {
		return engineErr("take a lease for importing "+name, err)
	}
	defer func() { _ = done(context.WithoutCancel(ctx)) }()
	cmd := exec.CommandContext(ctx, "docker", "save", name)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 8 << 10}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return errdefs.Internal("docker save cannot be started: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return errdefs.FailedPrecondition("docker save cannot be run (%v); install Docker or import %s some other way", err, name)
	}
	imgs, ierr := b.cli.Import(ctx, out)
	// Drain what the importer left so docker save can finish, then reap it.
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if werr != nil {
		return errdefs.FailedPrecondition("docker save %s failed (%v: %s); build the image with `make images` first",
			name, werr, strings.TrimSpace(stderr.String()))
	}
	if ierr != nil {
		return engineErr("import image "+name, ierr)
	}
	want := normalize(name)
	for _, i := range imgs {
		if i.Name != want {
			continue
		}
		return b.unpack(ctx, containerd.NewImage(b.cli, i), name)
	}
	names := make([]string, 0, len(imgs))
	for _, i := range imgs {
		names = append(names, i.Name)
	}
	return errdefs.Internal("importing %s into containerd gave images %v, not %s", name, names, want)
}

// unpack unpacks img for the snapshotter and checks that it stayed so. A
// snapshot that already existed (a new build over the same layers) is not
// covered by the lease: the collector, woken by the replaced image, can take
// it between the unpacker's existence check and the label that references
// it. Checking and unpacking again closes that window; the lease protects a
// snapshot the unpacker makes itself.
func (b *Backend) unpack(ctx context.Context, img containerd.Image, name string) error {
	const attempts = 3
	for range attempts {
		if err := img.Unpack(ctx, b.snapshotter); err != nil {
			return engineErr("unpack image "+name, err)
		}
		ok, err := img.IsUnpacked(ctx, b.snapshotter)
		if err != nil {
			return engineErr("check the unpacked image "+name, err)
		}
		if ok {
			return nil
		}
	}
	return errdefs.Unavailable("image %s lost its unpacked layers %d times in a row; containerd's garbage collector keeps removing them, try again", name, attempts)
}

// SyncFromDocker makes the namespace hold the same image as the local Docker
// engine under name: it imports it when containerd lacks it or holds
// another build (compared by config digest, which is Docker's image id).
// It reports whether it imported.
func (b *Backend) SyncFromDocker(ctx context.Context, name string) (bool, error) {
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", name).Output()
	if err != nil {
		return false, errdefs.FailedPrecondition("image %s is not in Docker (%v); build it with `make images` first", name, err)
	}
	want := strings.TrimSpace(string(out))
	img, err := b.cli.GetImage(b.nsCtx(ctx), normalize(name))
	switch {
	case err == nil:
		cfg, err := img.Config(b.nsCtx(ctx))
		if err != nil {
			return false, engineErr("read the config of image "+name, err)
		}
		if cfg.Digest.String() == want {
			return false, nil
		}
	case !cerrdefs.IsNotFound(err):
		return false, engineErr("look up image "+name, err)
	}
	return true, b.ImportFromDocker(ctx, name)
}

// limitedBuffer keeps the first max bytes written and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
