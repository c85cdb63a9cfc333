package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const defaultWalkMax = 200000

var defaultSkipDirs = []string{".git", "node_modules"}

// walk lists regular files under a confined directory. Symlinks to files
// inside the root are listed (Symlink set); symlinked directories are not
// entered, so a link cycle cannot loop the walk.
func walk(r *proto.WalkRequest) (*proto.WalkResponse, error) {
	c, err := confine(r.Root, r.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(c.abs)
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	if !fi.IsDir() {
		return nil, errdefs.InvalidArgument("%s is a file, not a directory; walk a directory or read the file", r.Path)
	}
	max := r.MaxEntries
	if max <= 0 {
		max = defaultWalkMax
	}
	skip := r.SkipDirs
	if skip == nil {
		skip = defaultSkipDirs
	}
	// rootRel is the walked directory relative to the root, so .gitignore
	// files between the root and it apply as well.
	rootRel, _ := filepath.Rel(c.root, c.abs)
	rootRel = filepath.ToSlash(rootRel)
	if rootRel == "." {
		rootRel = ""
	}
	var stack ignoreStack
	if r.Gitignore {
		stack = parentIgnores(c.root, rootRel)
	}
	out := &proto.WalkResponse{Base: c.abs, Files: []proto.FileInfo{}}
	errStop := errors.New("stop")
	// depthOf is how many ignore files are in force inside each directory.
	depthOf := map[string]int{}
	werr := filepath.WalkDir(c.abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == c.abs {
				return err
			}
			return nil // unreadable entries are left out
		}
		rel, _ := filepath.Rel(c.abs, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p == c.abs {
				if r.Gitignore {
					stack = loadIgnore(stack, p, rootRel)
					depthOf[""] = len(stack)
				}
				return nil
			}
			if slices.Contains(skip, d.Name()) {
				return filepath.SkipDir
			}
			if r.Gitignore {
				stack = stack[:depthOf[parentRel(rel)]]
				if stack.ignored(join(rootRel, rel), true) {
					return filepath.SkipDir
				}
				stack = loadIgnore(stack, p, join(rootRel, rel))
				depthOf[rel] = len(stack)
			}
			return nil
		}
		info, symlink, ok := fileEntry(c.root, p, d)
		if !ok {
			return nil
		}
		if r.Gitignore {
			stack = stack[:depthOf[parentRel(rel)]]
			if stack.ignored(join(rootRel, rel), false) {
				return nil
			}
		}
		if r.MaxSize > 0 && info.Size() > r.MaxSize {
			return nil
		}
		if len(out.Files) >= max {
			out.Truncated = true
			return errStop
		}
		out.Files = append(out.Files, proto.FileInfo{
			Path: rel, Size: info.Size(), Mode: uint32(info.Mode()), ModTime: info.ModTime(), Symlink: symlink,
		})
		return nil
	})
	if werr != nil && !errors.Is(werr, errStop) {
		return nil, fsError(werr, r.Path)
	}
	return out, nil
}

// fileEntry returns the info of a regular file, or of a symlink's target
// when that is a regular file inside root.
func fileEntry(root, p string, d fs.DirEntry) (fs.FileInfo, bool, bool) {
	if d.Type().IsRegular() {
		info, err := d.Info()
		return info, false, err == nil
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return nil, false, false
	}
	target, err := filepath.EvalSymlinks(p)
	if err != nil || !within(root, target) {
		return nil, false, false
	}
	info, err := os.Stat(target)
	if err != nil || !info.Mode().IsRegular() {
		return nil, false, false
	}
	return info, true, true
}

// parentIgnores loads the .gitignore files from root down to (not including) rel.
func parentIgnores(root, rel string) ignoreStack {
	var stack ignoreStack
	if rel == "" {
		return stack
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		base := strings.Join(parts[:i], "/")
		stack = loadIgnore(stack, filepath.Join(root, filepath.FromSlash(base)), base)
	}
	return stack
}

func loadIgnore(stack ignoreStack, dir, base string) ignoreStack {
	f, err := os.Open(filepath.Join(dir, ".gitignore"))
	if err != nil {
		return stack
	}
	defer f.Close()
	if ig := parseGitignore(base, f); len(ig.rules) > 0 {
		return append(stack, ig)
	}
	return stack
}

func parentRel(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}
