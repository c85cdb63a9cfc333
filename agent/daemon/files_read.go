package daemon

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	defaultReadMax = 16 << 20
	// maxReadData keeps one response's file data under MaxFrame once JSON has
	// spelled it in base64 (4/3 larger) with room for the rest of the frame.
	maxReadData = proto.MaxFrame / 4 * 3 * 15 / 16
)

// fsError turns an os error on a confined path into a classed error.
func fsError(err error, path string) error {
	switch {
	case errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, errdefs.ErrNotFound):
		return err // already classed by openBeneath or openRegular
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.NotFound("%s does not exist; check the path", path)
	case errors.Is(err, fs.ErrPermission):
		return errdefs.FailedPrecondition("%s cannot be accessed (permission denied)", path)
	default:
		return errdefs.Internal("%s: %v", path, err)
	}
}

// readLimits are the file service's rules for opening a file to read it.
type readLimits struct {
	// singleLink refuses a regular file with more than one hard link. On
	// the host backend the workspace shares a file system with the rest of
	// the machine, and a link made with ln through shell to a file outside
	// would read back that file; a container's workspace is its own
	// file system, where such a link cannot be made.
	singleLink bool
}

// openRegular opens a file beneath r to read it. The open does not block
// (a FIFO would otherwise wait for a writer, a device for its driver) and
// follows no symlink; the open file is then checked to be a regular file,
// so nothing but one is ever read.
func (r *beneathRoot) openRegular(abs, name string, lim readLimits) (*os.File, fs.FileInfo, error) {
	f, err := r.openNonblock(abs, name)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regularFile(fi, name, lim)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// openNonblock opens abs beneath r for reading without waiting on it and
// without following a symlink; the commit's hidden files do not exist here.
func (r *beneathRoot) openNonblock(abs, name string) (*os.File, error) {
	if commitTemp(filepath.Base(abs)) {
		return nil, errdefs.NotFound("%s does not exist; check the path", name)
	}
	return r.open(abs, name, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
}

// regularFile refuses what openRegular must not read, with an error
// message saying why.
func regularFile(fi fs.FileInfo, name string, lim readLimits) error {
	switch {
	case fi.IsDir():
		return errdefs.InvalidArgument("%s is a directory, not a file; list it with walk", name)
	case !fi.Mode().IsRegular():
		return errdefs.InvalidArgument("%s is a %s, not a regular file; only regular files can be read or written through the file operations", name, fileType(fi.Mode()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && lim.singleLink && st.Nlink > 1 {
		return errdefs.FailedPrecondition("%s has %d hard links, and on this backend another link may be a file outside the workspace, so it is not opened; replace it with a copy of its own (cp %s %s.copy && mv %s.copy %s) and retry", name, st.Nlink, name, name, name, name)
	}
	return nil
}

// fileType names a non-regular file's type for a message.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "unix socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "special file (" + m.Type().String() + ")"
}

func readFile(r *proto.ReadFileRequest, lim readLimits) (*proto.ReadFileResponse, error) {
	c, err := confine(r.Root, r.Path)
	if err != nil {
		return nil, err
	}
	max := r.MaxBytes
	if max <= 0 {
		max = defaultReadMax
	}
	max = min(max, maxReadData)
	root, err := openRoot(c.root)
	if err != nil {
		return nil, fsError(err, r.Root)
	}
	defer root.close()
	f, fi, err := root.openRegular(c.abs, r.Path, lim)
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	size := fi.Size()
	if int64(len(data)) > size { // grew while being read
		size = int64(len(data))
	}
	return &proto.ReadFileResponse{
		Path:      c.abs,
		Data:      data,
		Size:      size,
		Mode:      uint32(fi.Mode()),
		ModTime:   fi.ModTime(),
		Truncated: size > int64(len(data)),
	}, nil
}

func readFiles(r *proto.ReadFilesRequest, lim readLimits) (*proto.ReadFilesResponse, error) {
	realRoot, err := resolveRoot(r.Root)
	if err != nil {
		return nil, err
	}
	total := r.MaxTotal
	if total <= 0 {
		total = 48 << 20
	}
	total = min(total, maxReadData)
	each := r.MaxBytesEach
	if each <= 0 {
		each = defaultReadMax
	}
	root, err := openRoot(realRoot)
	if err != nil {
		return nil, fsError(err, r.Root)
	}
	defer root.close()
	out := &proto.ReadFilesResponse{Files: make([]proto.FileData, 0, len(r.Paths))}
	var used int64
	for _, p := range r.Paths {
		fd := proto.FileData{Path: p}
		c, err := confineIn(filepath.Clean(r.Root), realRoot, p)
		if err != nil {
			fd.Skipped = err.Error()
			out.Files = append(out.Files, fd)
			continue
		}
		fd.Skipped = readOne(root, c, each, total-used, lim, &fd)
		used += int64(len(fd.Data))
		out.Files = append(out.Files, fd)
	}
	return out, nil
}

// readOne fills fd from c and returns why the data is absent, if it is.
func readOne(root *beneathRoot, c *confined, each, left int64, lim readLimits, fd *proto.FileData) string {
	f, err := root.openNonblock(c.abs, fd.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errdefs.ErrNotFound) {
			return "not found"
		}
		return err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	switch {
	case fi.IsDir():
		return "is a directory"
	case !fi.Mode().IsRegular():
		return "not a regular file (a " + fileType(fi.Mode()) + ")"
	}
	if err := regularFile(fi, fd.Path, lim); err != nil {
		return err.Error()
	}
	fd.Size, fd.ModTime = fi.Size(), fi.ModTime()
	switch {
	case fi.Size() > each:
		return "too large"
	case fi.Size() > left:
		return "over total cap"
	}
	data, err := io.ReadAll(io.LimitReader(f, min(each, left)+1))
	if err != nil {
		return err.Error()
	}
	if int64(len(data)) > min(each, left) { // grew since the stat
		return "too large"
	}
	fd.Data = data
	return ""
}

func stat(r *proto.StatRequest) (*proto.StatResponse, error) {
	c, err := confine(r.Root, r.Path)
	if err != nil {
		return nil, err
	}
	// Through an os.Root on the workspace: a directory swapped for a
	// symlink since confine cannot make this describe a file outside.
	root, err := os.OpenRoot(c.root)
	if err != nil {
		return nil, fsError(err, r.Root)
	}
	defer root.Close()
	rel, _ := filepath.Rel(c.root, c.abs)
	if commitTemp(filepath.Base(rel)) {
		return nil, errdefs.NotFound("%s does not exist; check the path", r.Path)
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	li, lerr := os.Lstat(c.lexical)
	return &proto.StatResponse{FileInfo: proto.FileInfo{
		Path:    c.abs,
		Size:    fi.Size(),
		Mode:    uint32(fi.Mode()),
		ModTime: fi.ModTime(),
		IsDir:   fi.IsDir(),
		Symlink: lerr == nil && li.Mode()&fs.ModeSymlink != 0,
	}}, nil
}
