package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/errdefs"
)

// confine checks a path by resolving it; a process in the sandbox could
// swap a directory on the way for a symlink between that check and the
// open. openBeneath closes that window: it opens the resolved path relative
// to the root with openat2, refusing every symlink (the resolved path has
// none) and any step out of the root, so a swap makes the open fail instead
// of leading elsewhere.

// beneathAttempts bounds retries of openat2's EAGAIN (a rename elsewhere
// on the file system during the lookup).
const beneathAttempts = 8

// haveOpenat2 tells whether this kernel and seccomp profile allow openat2
// (Linux 5.6+; container runtimes' default profiles allow it). It is a
// property of the machine, probed once; without it opens fall back to the
// path confine checked.
var haveOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// errSwapped is what a request sees when a path changed under it.
func errSwapped(path string) error {
	return errdefs.FailedPrecondition("%s changed while it was being opened (a symlink appeared on the way); try again", path)
}

// openBeneath opens abs (inside root, both resolved by confine) with flags
// and mode, following no symlink and never leaving root. name is the path
// as the request gave it, for messages.
func openBeneath(root, abs, name string, flags int, mode fs.FileMode) (*os.File, error) {
	r, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.open(abs, name, flags, mode)
}

// beneathRoot is a root held open for many openBeneath calls (a batch).
type beneathRoot struct {
	path string
	fd   int // -1 without openat2
}

func openRoot(root string) (*beneathRoot, error) {
	r := &beneathRoot{path: root, fd: -1}
	if !haveOpenat2() {
		return r, nil
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	r.fd = fd
	return r, nil
}

func (r *beneathRoot) close() {
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// open is openBeneath under r.
func (r *beneathRoot) open(abs, name string, flags int, mode fs.FileMode) (*os.File, error) {
	if r.fd < 0 {
		return os.OpenFile(abs, flags, mode)
	}
	rel, err := filepath.Rel(r.path, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, errdefs.InvalidArgument("path %q is outside the workspace %s; give a path inside it", name, r.path)
	}
	return openatBeneath(r.fd, rel, abs, name, flags, mode)
}

// openatBeneath is openBeneath from an open directory dirfd; display is
// the file's full path for the *os.File.
func openatBeneath(dirfd int, rel, display, name string, flags int, mode fs.FileMode) (*os.File, error) {
	if !haveOpenat2() {
		return openatNoFollow(dirfd, rel, display, name, flags, mode)
	}
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Mode:    uint64(mode.Perm()),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&unix.O_CREAT == 0 {
		how.Mode = 0 // openat2 refuses a mode without O_CREAT or O_TMPFILE
	}
	var err error
	for range beneathAttempts {
		var fd int
		fd, err = unix.Openat2(dirfd, rel, how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), display), nil
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
			return nil, errSwapped(name)
		}
		return nil, &fs.PathError{Op: "open", Path: display, Err: err}
	}
	return nil, &fs.PathError{Op: "open", Path: display, Err: err}
}

// openatNoFollow is openatBeneath where openat2 is missing (kernels before
// 5.6, gVisor): rel must be one name in dirfd, which O_NOFOLLOW then keeps
// from being a symlink; a longer path is refused rather than resolved
// unchecked.
func openatNoFollow(dirfd int, rel, display, name string, flags int, mode fs.FileMode) (*os.File, error) {
	if rel == "" || rel == "." || rel == ".." || strings.Contains(rel, "/") {
		return nil, &fs.PathError{Op: "open", Path: display, Err: unix.EINVAL}
	}
	fd, err := unix.Openat(dirfd, rel, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, uint32(mode.Perm()))
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, errSwapped(name)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: display, Err: err}
	}
	return os.NewFile(uintptr(fd), display), nil
}
