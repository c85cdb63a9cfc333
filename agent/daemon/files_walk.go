package daemon

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

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
	// rootRel is the walked directory relative to the root, so .gitignore
	// files between the root and it apply as well.
	rootRel, _ := filepath.Rel(c.root, c.abs)
	rootRel = filepath.ToSlash(rootRel)
	start := rootRel
	if rootRel == "." {
		rootRel = ""
	}
	fi, err := root.Stat(start)
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
		stack = parentIgnores(root, rootRel)
	}
	out := &proto.WalkResponse{Base: c.abs, Files: []proto.FileInfo{}}
	dir, err := root.Open(start)
	if err != nil {
		return nil, fsError(err, r.Path)
	}
	w := &walker{root: c.root, ws: root, req: r, skip: skip, max: max, rootRel: rootRel, out: out}
	if r.Gitignore {
		stack = loadIgnore(stack, root, start, rootRel)
	}
	w.dir(dir, start, "", stack)
	return out, nil
}

// walker lists one walk's files. Each directory is held open while it is
// listed: its entries are stat'ed and its subdirectories opened relative
// to it (fstatat, openat without following a symlink), so the walk costs
// one call per entry and never leaves the directory it checked.
type walker struct {
	root    string   // the workspace, resolved
	ws      *os.Root // the workspace, for .gitignore files
	req     *proto.WalkRequest
	skip    []string
	max     int
	rootRel string
	out     *proto.WalkResponse
	stopped bool
}

// linkTarget is the info of the file symlink p (in the root) leads to, when
// that is a regular file inside the root; the target is opened beneath the
// root, so a swap after the resolution cannot describe a file outside.
func (w *walker) linkTarget(p string) (fs.FileInfo, bool) {
	target, err := filepath.EvalSymlinks(filepath.Join(w.root, filepath.FromSlash(p)))
	if err != nil || !within(w.root, target) {
		return nil, false
	}
	f, err := openBeneath(w.root, target, p, unix.O_PATH, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil, false
	}
	return info, true
}

// skipped records a directory not entered, when the request asks.
func (w *walker) skipped(rel, reason string) {
	if !w.req.ReportSkipped {
		return
	}
	if len(w.out.Skipped) >= proto.MaxSkippedReported {
		w.out.SkippedMore++
		return
	}
	w.out.Skipped = append(w.out.Skipped, proto.SkippedDir{Dir: rel, Reason: reason})
}

// linkedDir reports whether the symlink p (in the root) leads to a
// directory, for the report of what the walk left out; it is never
// entered.
func (w *walker) linkedDir(p string) bool {
	info, err := os.Stat(filepath.Join(w.root, filepath.FromSlash(p)))
	return err == nil && info.IsDir()
}

// dir lists d (p in fsys, rel under the walked directory) and closes it.
func (w *walker) dir(d *os.File, p, rel string, stack ignoreStack) {
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil && len(ents) == 0 {
		return // unreadable directories are left out
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	fd := int(d.Fd())
	for _, e := range ents {
		if w.stopped {
			return
		}
		name := e.Name()
		if commitTemp(name) {
			continue // a commit's hidden file, never part of the listing
		}
		erel, ep := join(rel, name), path.Join(p, name)
		if e.IsDir() {
			if slices.Contains(w.skip, name) {
				w.skipped(erel, proto.SkipReasonList)
				continue
			}
			sub := stack
			if w.req.Gitignore {
				if stack.ignored(join(w.rootRel, erel), true) {
					w.skipped(erel, proto.SkipReasonGitignore)
					continue
				}
			}
			nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				w.skipped(erel, proto.SkipReasonUnreadable)
				continue
			}
			if w.req.Gitignore {
				sub = loadIgnore(stack, w.ws, ep, join(w.rootRel, erel))
			}
			w.dir(os.NewFile(uintptr(nfd), ep), ep, erel, sub)
			continue
		}
		var size int64
		var mode fs.FileMode
		var mtime time.Time
		symlink := false
		switch {
		case e.Type().IsRegular():
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			size, mode, mtime = st.Size, fs.FileMode(st.Mode&0o777), time.Unix(st.Mtim.Unix())
		case e.Type()&fs.ModeSymlink != 0:
			info, ok := w.linkTarget(ep)
			if !ok {
				if w.req.ReportSkipped && w.linkedDir(ep) && !(w.req.Gitignore && stack.ignored(join(w.rootRel, erel), true)) {
					w.skipped(erel, proto.SkipReasonSymlink)
				}
				continue
			}
			size, mode, mtime, symlink = info.Size(), info.Mode(), info.ModTime(), true
		default:
			continue
		}
		if w.req.Gitignore && stack.ignored(join(w.rootRel, erel), false) {
			continue
		}
		if w.req.MaxSize > 0 && size > w.req.MaxSize {
			continue
		}
		if len(w.out.Files) >= w.max {
			w.out.Truncated, w.stopped = true, true
			return
		}
		w.out.Files = append(w.out.Files, proto.FileInfo{Path: erel, Size: size, Mode: uint32(mode), ModTime: mtime, Symlink: symlink})
	}
}

// parentIgnores loads the .gitignore files from the root down to (not
// including) rel.
func parentIgnores(root *os.Root, rel string) ignoreStack {
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
		stack = loadIgnore(stack, root, dir, base)
	}
	return stack
}

// loadIgnore adds dir's .gitignore (dir in root; base is its path for the
// rules) to stack. It is opened without blocking and read only when it is a
// regular file, so a FIFO named .gitignore cannot stall the walk.
func loadIgnore(stack ignoreStack, root *os.Root, dir, base string) ignoreStack {
	f, err := root.OpenFile(path.Join(dir, ".gitignore"), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return stack
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return stack
	}
	if ig := parseGitignore(base, f); len(ig.rules) > 0 {
		return append(stack, ig)
	}
	return stack
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}
