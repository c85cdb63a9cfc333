package daemon

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Extended attributes: written with a file's new content by write_files
// (proto.WriteFile.Xattrs), read back for many paths by the xattrs op.
// Only the "user." namespace, which belongs to a file's owner: the others
// hold the kernel's and the system's own (capabilities, ACLs, SELinux
// labels), which no caller of the agent has reason to see or set.

// xattrNameMax is the kernel's limit on an attribute's name.
const xattrNameMax = 255

// checkXattrs refuses the attributes a write asks for before anything is
// written.
func checkXattrs(f *proto.WriteFile) error {
	if len(f.Xattrs) == 0 {
		return nil
	}
	if f.Delete {
		return errdefs.InvalidArgument("%s is deleted and given extended attributes; drop xattrs from a delete", f.Path)
	}
	if len(f.Xattrs) > proto.MaxXattrsPerFile {
		return errdefs.InvalidArgument("%s is given %d extended attributes; give at most %d", f.Path, len(f.Xattrs), proto.MaxXattrsPerFile)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Xattrs)) {
		switch {
		case !strings.HasPrefix(name, proto.XattrUserPrefix) || len(name) == len(proto.XattrUserPrefix):
			return errdefs.InvalidArgument("extended attribute %q of %s is not in the user namespace; give names that begin with %q and go on", name, f.Path, proto.XattrUserPrefix)
		case len(name) > xattrNameMax || strings.IndexByte(name, 0) >= 0:
			return errdefs.InvalidArgument("extended attribute name %q of %s is longer than %d bytes or has a NUL byte; give a shorter plain name", name, f.Path, xattrNameMax)
		case len(f.Xattrs[name]) > proto.MaxXattrValue:
			return errdefs.InvalidArgument("extended attribute %q of %s has a value of %d bytes; give at most %d", name, f.Path, len(f.Xattrs[name]), proto.MaxXattrValue)
		}
	}
	return nil
}

// setXattrs sets attrs on the open file f, whose directory is dir (for the
// refusal of a file system that keeps none).
func setXattrs(f *os.File, attrs map[string]string, dir, display string) error {
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		err := unix.Fsetxattr(int(f.Fd()), name, []byte(attrs[name]), 0)
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOTSUP):
			return errdefs.FailedPrecondition("the file system at %s does not keep extended attributes; write without metadata", dir)
		case errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ERANGE):
			return errdefs.FailedPrecondition("the file system at %s has no room for the extended attributes of %s (%v); write fewer or smaller ones", dir, display, err)
		default:
			return errdefs.Internal("cannot set extended attribute %q of %s: %v", name, display, err)
		}
	}
	return nil
}

// xattrs serves the xattrs op.
func (f *fileService) xattrs(_ context.Context, _ *request, r *proto.XattrsRequest) (*proto.Response, func(), error) {
	resp, err := readXattrs(r)
	return &proto.Response{Xattrs: resp}, nil, err
}

// readXattrs reads the attributes of r's prefix of each of r's paths. A
// path whose attributes cannot be read, for any reason, is left out: one
// entry of a listing must not fail the listing.
func readXattrs(r *proto.XattrsRequest) (*proto.XattrsResponse, error) {
	if !strings.HasPrefix(r.Prefix, proto.XattrUserPrefix) {
		return nil, errdefs.InvalidArgument("prefix %q does not begin with %q; only the user namespace is read (such as %q)", r.Prefix, proto.XattrUserPrefix, "user.e2b.")
	}
	if len(r.Paths) > proto.MaxXattrPaths {
		return nil, errdefs.InvalidArgument("%d paths were given; ask for at most %d at once", len(r.Paths), proto.MaxXattrPaths)
	}
	for _, p := range r.Paths {
		if !filepath.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
			return nil, errdefs.InvalidArgument("path %q is not an absolute path; give each file's full path in the sandbox", p)
		}
	}
	resp := &proto.XattrsResponse{}
	size := 0
	var list []byte
	for _, p := range r.Paths {
		if _, dup := resp.Attrs[p]; dup {
			continue
		}
		var attrs map[string]string
		list = listXattrs(p, list)
		for name := range strings.SplitSeq(string(list), "\x00") {
			if name == "" || !strings.HasPrefix(name, r.Prefix) {
				continue
			}
			v, ok := getXattr(p, name)
			if !ok || !utf8.ValidString(v) {
				continue
			}
			if attrs == nil {
				attrs = map[string]string{}
			}
			attrs[name] = v
			size += jsonLen(name) + jsonLen(v) + 6
		}
		if attrs == nil {
			continue
		}
		if resp.Attrs == nil {
			resp.Attrs = map[string]map[string]string{}
		}
		size += jsonLen(p) + 6
		resp.Attrs[p] = attrs
		if size > proto.MaxXattrsAnswer {
			return nil, errdefs.ResourceExhausted("the extended attributes of the %d paths come to more than %d MiB; ask for fewer paths at once", len(r.Paths), proto.MaxXattrsAnswer>>20)
		}
	}
	return resp, nil
}

// xattrListMax is the kernel's limit on a file's list of attribute names.
const xattrListMax = 64 << 10

// listXattrs returns path's attribute names (NUL-separated; empty when
// they cannot be read), in buf's space when it is large enough. A symlink's
// own are listed.
func listXattrs(path string, buf []byte) []byte {
	if cap(buf) < 1024 {
		buf = make([]byte, 1024)
	}
	buf = buf[:cap(buf)]
	for range 3 { // the list may grow between the size and the read
		n, err := unix.Llistxattr(path, buf)
		switch {
		case err == nil:
			return buf[:n]
		case errors.Is(err, unix.ERANGE):
			n, err = unix.Llistxattr(path, nil)
			if err != nil || n > xattrListMax {
				return buf[:0]
			}
			buf = make([]byte, n+256)
		default:
			return buf[:0]
		}
	}
	return buf[:0]
}

// getXattr reads one attribute of path itself (not a symlink's target).
func getXattr(path, name string) (string, bool) {
	buf := make([]byte, 256)
	for range 3 { // the value may grow between the size and the read
		n, err := unix.Lgetxattr(path, name, buf)
		switch {
		case err == nil:
			return string(buf[:n]), true
		case errors.Is(err, unix.ERANGE):
			n, err = unix.Lgetxattr(path, name, nil)
			if err != nil || n > proto.MaxXattrValue {
				return "", false
			}
			buf = make([]byte, n+64)
		default:
			return "", false
		}
	}
	return "", false
}

// jsonLen bounds the length of s as a JSON string's contents: what the
// answer's cap counts, so that no escaping takes it past the frame.
func jsonLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		case c == '"' || c == '\\':
			n += 2
		default:
			n++
		}
	}
	// U+2028 and U+2029, three bytes each, are escaped as six.
	return n + 3*strings.Count(s, "\u2028") + 3*strings.Count(s, "\u2029")
}
