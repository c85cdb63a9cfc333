package containerd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/mount"
	"golang.org/x/sys/unix"
)

// An image's layers are mounted read-only to read a container's changes
// (overlayDiff) under the data dir, in a directory named after the process
// that made it: PID-random. A sandboxd killed while one is mounted leaves
// it; the next backend made on the data dir unmounts the ones whose
// process is gone, leaving those of a live sandboxd sharing the dir alone.

// mountsDir holds the temporary mounts.
func (b *Backend) mountsDir() string { return filepath.Join(b.dataDir, "containerd", "mounts") }

// withReadonlyMount mounts ms read-only on a fresh directory for fn, and
// unmounts and removes it after.
func (b *Backend) withReadonlyMount(ms []mount.Mount, fn func(root string) error) error {
	if err := os.MkdirAll(b.mountsDir(), 0o700); err != nil {
		return err
	}
	root, err := os.MkdirTemp(b.mountsDir(), strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return err
	}
	ro := make([]mount.Mount, len(ms))
	for i, m := range ms {
		m.Options = readonly(m)
		ro[i] = m
	}
	if err := mount.All(ro, root); err != nil {
		_ = os.Remove(root)
		return err
	}
	defer func() {
		if err := mount.UnmountAll(root, unix.MNT_DETACH); err != nil {
			b.log.Warn("cannot unmount a temporary mount of an image's layers", "dir", root, "err", err)
			return
		}
		_ = os.Remove(root)
	}()
	return fn(root)
}

// readonly is m's options for a read-only mount. An overlay cannot be
// mounted "ro" with an upper directory: its upper directory becomes the
// topmost lower one instead (what it holds stays visible), and its work
// directory and "volatile" (which forbids mounting the same upper twice)
// go. Any other mount gets "ro" in place of "rw".
func readonly(m mount.Mount) []string {
	out := make([]string, 0, len(m.Options)+1)
	if m.Type == "overlay" {
		upper := ""
		for _, o := range m.Options {
			switch {
			case strings.HasPrefix(o, "upperdir="):
				upper = strings.TrimPrefix(o, "upperdir=")
			case strings.HasPrefix(o, "workdir="), o == "volatile":
			default:
				out = append(out, o)
			}
		}
		for i, o := range out {
			if lower, ok := strings.CutPrefix(o, "lowerdir="); ok && upper != "" {
				out[i] = "lowerdir=" + upper + ":" + lower
			}
		}
		return out
	}
	for _, o := range m.Options {
		if o != "rw" && o != "ro" {
			out = append(out, o)
		}
	}
	return append(out, "ro")
}

// sweepMounts unmounts and removes the temporary mounts left by processes
// that are gone.
func (b *Backend) sweepMounts() {
	ents, err := os.ReadDir(b.mountsDir())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.log.Warn("cannot list the temporary mounts", "dir", b.mountsDir(), "err", err)
		}
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.SplitN(e.Name(), "-", 2)[0])
		if err != nil || alive(pid) {
			continue
		}
		dir := filepath.Join(b.mountsDir(), e.Name())
		if err := mount.UnmountAll(dir, unix.MNT_DETACH); err != nil {
			b.log.Warn("cannot unmount a temporary mount left by a sandboxd that is gone", "dir", dir, "err", err)
			continue
		}
		// Remove, not RemoveAll: were it still mounted, RemoveAll would
		// reach into the image's layers.
		if err := os.Remove(dir); err != nil {
			b.log.Warn("cannot remove a temporary mount's directory", "dir", dir, "err", err)
			continue
		}
		b.log.Info("removed a temporary mount left by a sandboxd that is gone", "dir", dir)
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
