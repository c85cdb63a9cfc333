package daemon

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	defaultReadMax = 16 << 20
	// maxReadData keeps one answer's file data under MaxFrame once JSON has
	// spelled it in base64 (4/3 larger) with room for the rest of the frame.
	maxReadData = proto.MaxFrame / 4 * 3 * 15 / 16
)

// fsError turns an os error on a confined path into a classed error.
func fsError(err error, path string) error {
	switch {
	case errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrInvalidArgument):
		return err // already classed by openBeneath
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.NotFound("%s does not exist; check the path", path)
	case errors.Is(err, fs.ErrPermission):
		return errdefs.FailedPrecondition("%s cannot be accessed (permission denied)", path)
	default:
		return errdefs.Internal("%s: %v", path, err)
	}
}

func readFile(r *proto.ReadFileRequest) (*proto.ReadFileResponse, error) {
	c, err := confine(r.Root, r.Path)
	if err != nil {
		return nil, err
	}
	max := r.MaxBytes
	if max <= 0 {
		max = defaultReadMax
	}
	max = min(max, maxReadData)
	f, err := openBeneath(c.root, c.abs, r.Path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	if fi.IsDir() {
		return nil, errdefs.InvalidArgument("%s is a directory, not a file; list it with walk", r.Path)
	}
	if !fi.Mode().IsRegular() {
		return nil, errdefs.InvalidArgument("%s is not a regular file (%s); only regular files can be read", r.Path, fi.Mode().Type())
	}
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

func readFiles(r *proto.ReadFilesRequest) (*proto.ReadFilesResponse, error) {
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
		fd.Skipped = readOne(root, c, each, total-used, &fd)
		used += int64(len(fd.Data))
		out.Files = append(out.Files, fd)
	}
	return out, nil
}

// readOne fills fd from c and returns why the data is absent, if it is.
func readOne(root *beneathRoot, c *confined, each, left int64, fd *proto.FileData) string {
	f, err := root.open(c.abs, fd.Path, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "not found"
		}
		return err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	fd.Size, fd.ModTime = fi.Size(), fi.ModTime()
	switch {
	case fi.IsDir():
		return "is a directory"
	case !fi.Mode().IsRegular():
		return "not a regular file"
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
