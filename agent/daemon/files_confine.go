package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/errdefs"
)

// maxLinkHops bounds symlink resolution, as the kernel's ELOOP does.
const maxLinkHops = 40

// confined is a path that was checked to lie inside its root.
type confined struct {
	root string // the root with its symlinks resolved
	abs  string // the target with every existing symlink resolved; inside root
	// lexical is the requested path made absolute without resolving
	// symlinks; Lstat of it tells whether the caller named a symlink.
	lexical string
}

// resolveRoot checks a request's Root and resolves its symlinks.
func resolveRoot(root string) (string, error) {
	if root == "" {
		return "", errdefs.InvalidArgument("the request has no root; set root to the absolute workspace directory")
	}
	if strings.IndexByte(root, 0) >= 0 {
		return "", errdefs.InvalidArgument("root %q contains a NUL byte; give a plain absolute path", root)
	}
	if !filepath.IsAbs(root) {
		return "", errdefs.InvalidArgument("root %q is not absolute; give the workspace as an absolute path", root)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(root))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", errdefs.NotFound("root %q does not exist; create the workspace directory first", root)
		}
		return "", errdefs.InvalidArgument("root %q cannot be resolved: %v", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", errdefs.InvalidArgument("root %q is not a directory; give the workspace directory", root)
	}
	return real, nil
}

// confine maps a request path to a real path inside root. Relative paths are
// taken from root; absolute ones must lie inside root (spelled either through
// root's symlink or its resolved form). Every symlink on the way, including
// the last component and dangling ones, is followed, and the result must
// still lie inside root; components that do not exist yet are kept as given,
// so a file to be created is checked through its deepest existing parent.
func confine(root, path string) (*confined, error) {
	realRoot, err := resolveRoot(root)
	if err != nil {
		return nil, err
	}
	return confineIn(filepath.Clean(root), realRoot, path)
}

func confineIn(root, realRoot, path string) (*confined, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, errdefs.InvalidArgument("path %q contains a NUL byte; give a plain path inside the workspace", path)
	}
	if path == "~" || strings.HasPrefix(path, "~/") {
		return nil, errdefs.InvalidArgument("path %q uses ~, which is not expanded here; give a path relative to the workspace %s", path, root)
	}
	var rel string
	if filepath.IsAbs(path) {
		p := filepath.Clean(path)
		switch {
		case within(root, p):
			rel, _ = filepath.Rel(root, p)
		case within(realRoot, p):
			rel, _ = filepath.Rel(realRoot, p)
		default:
			return nil, errdefs.InvalidArgument("path %q is outside the workspace %s; give a path inside it", path, root)
		}
	} else {
		rel = filepath.Clean(path)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, errdefs.InvalidArgument("path %q climbs out of the workspace %s with ..; give a path inside it", path, root)
		}
	}
	lexical := filepath.Join(realRoot, rel)
	abs, err := resolveLinks(realRoot, rel)
	if err != nil {
		return nil, errdefs.InvalidArgument("path %q cannot be resolved (%v); give a path inside the workspace %s", path, err, root)
	}
	if !within(realRoot, abs) {
		return nil, errdefs.InvalidArgument("path %q leads through a symlink to %s, outside the workspace %s; give a path inside it", path, abs, root)
	}
	return &confined{root: realRoot, abs: abs, lexical: lexical}, nil
}

// resolveLinks resolves rel under dir like the kernel would, following every
// symlink (absolute targets from "/"), and keeps the part that does not exist.
func resolveLinks(dir, rel string) (string, error) {
	cur := dir
	rest := splitPath(rel)
	hops := 0
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, comp)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				// The rest does not exist: keep it lexically.
				return filepath.Join(append([]string{next}, rest...)...), nil
			}
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		hops++
		if hops > maxLinkHops {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(splitPath(target), rest...)
	}
	return cur, nil
}

func splitPath(p string) []string { return strings.Split(p, "/") }

// within reports whether p is root or below it; both are clean and absolute.
func within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}
