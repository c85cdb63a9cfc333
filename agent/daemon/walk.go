package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path"
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
// entered, so a link cycle cannot loop the walk. Every directory is read
// through an os.Root on the workspace, so a directory swapped for a symlink
// while the walk runs cannot lead it outside.
func walk(r *proto.WalkRequest) (*proto.WalkResponse, error) {
	c, err := confine(r.Root, r.Path)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(c.root)
	if err != nil {
		return nil, fsError(err, r.Root)
	}
	defer root.Close()
	fsys := root.FS()
	// rootRel is the walked directory relative to the root, so .gitignore
	// files between the root and it apply as well.
	rootRel, _ := filepath.Rel(c.root, c.abs)
	rootRel = filepath.ToSlash(rootRel)
	start := rootRel
	if rootRel == "." {
		rootRel = ""
	}
	fi, err := fs.Stat(fsys, start)
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
	var stack ignoreStack
	if r.Gitignore {
		stack = parentIgnores(fsys, rootRel)
	}
	out := &proto.WalkResponse{Base: c.abs, Files: []proto.FileInfo{}}
	errStop := errors.New("stop")
	// depthOf is how many ignore files are in force inside each directory.
	depthOf := map[string]int{}
	werr := fs.WalkDir(fsys, start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return err
			}
			return nil // unreadable entries are left out
		}
		rel := p
		if start != "." {
			rel = strings.TrimPrefix(strings.TrimPrefix(p, start), "/")
		}
		if d.IsDir() {
			if p == start {
				if r.Gitignore {
					stack = loadIgnore(stack, fsys, p, rootRel)
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
				stack = loadIgnore(stack, fsys, p, join(rootRel, rel))
				depthOf[rel] = len(stack)
			}
			return nil
		}
		info, symlink, ok := fileEntry(fsys, p, d)
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
// when that is a regular file inside the root (fsys refuses the others).
func fileEntry(fsys fs.FS, p string, d fs.DirEntry) (fs.FileInfo, bool, bool) {
	if d.Type().IsRegular() {
		info, err := d.Info()
		return info, false, err == nil
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return nil, false, false
	}
	info, err := fs.Stat(fsys, p)
	if err != nil || !info.Mode().IsRegular() {
		return nil, false, false
	}
	return info, true, true
}

// parentIgnores loads the .gitignore files from the root down to (not
// including) rel.
func parentIgnores(fsys fs.FS, rel string) ignoreStack {
	var stack ignoreStack
	if rel == "" {
		return stack
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		base := strings.Join(parts[:i], "/")
		dir := base
		if dir == "" {
			dir = "."
		}
		stack = loadIgnore(stack, fsys, dir, base)
	}
	return stack
}

// loadIgnore adds dir's .gitignore (dir in fsys; base is its path for the
// rules) to stack.
func loadIgnore(stack ignoreStack, fsys fs.FS, dir, base string) ignoreStack {
	f, err := fsys.Open(path.Join(dir, ".gitignore"))
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
