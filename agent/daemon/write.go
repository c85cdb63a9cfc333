package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// writePlan is one entry of a write_files batch on its way to disk.
type writePlan struct {
	req    *proto.WriteFile
	root   string // the resolved root
	target string // resolved path
	// dir is the target's directory, opened beneath the root without
	// following symlinks once it exists; every change to the target is made
	// relative to it, so a directory swapped for a symlink after the check
	// cannot redirect the write.
	dir      *os.File
	existed  bool
	tmp      string // staged new content
	backup   string // the old file, kept until the batch commits
	moved    bool   // backup was made by moving the target aside, not linking
	renamed  bool   // the new content (or the deletion) is in place
	madeDirs []string
}

// writeFiles applies a batch all or nothing: check every expectation, stage
// every new content beside its target (fsynced), then rename them into place
// one by one, keeping each old file as a hard-linked backup; a failure puts
// back everything already renamed and removes what was staged.
func writeFiles(r *proto.WriteFilesRequest, hook func(int) error) (err error) {
	if len(r.Files) == 0 {
		return errdefs.InvalidArgument("write_files has no files; list at least one")
	}
	realRoot, err := resolveRoot(r.Root)
	if err != nil {
		return err
	}
	plans := make([]*writePlan, len(r.Files))
	seen := map[string]string{}
	for i := range r.Files {
		f := &r.Files[i]
		c, err := confineIn(filepath.Clean(r.Root), realRoot, f.Path)
		if err != nil {
			return err
		}
		if c.abs == realRoot {
			return errdefs.InvalidArgument("path %q is the workspace itself; name a file inside it", f.Path)
		}
		if prev, dup := seen[c.abs]; dup {
			return errdefs.InvalidArgument("paths %q and %q name the same file; list each file once", prev, f.Path)
		}
		seen[c.abs] = f.Path
		p := &writePlan{req: f, root: realRoot, target: c.abs}
		plans[i] = p
		if err := checkExpectations(p); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			rollback(plans)
		}
		for _, p := range plans {
			if p != nil && p.dir != nil {
				p.dir.Close()
			}
		}
	}()
	for _, p := range plans {
		if err := stage(p); err != nil {
			return err
		}
	}
	for i, p := range plans {
		if hook != nil {
			if err := hook(i); err != nil {
				return err
			}
		}
		if err := commit(p); err != nil {
			return err
		}
	}
	for _, p := range plans {
		if p.backup != "" {
			_ = unix.Unlinkat(int(p.dir.Fd()), filepath.Base(p.backup), 0)
		}
		_ = p.dir.Sync()
	}
	return nil
}

func checkExpectations(p *writePlan) error {
	f := p.req
	fi, err := os.Lstat(p.target)
	switch {
	case err == nil:
		p.existed = true
		if fi.IsDir() {
			return errdefs.InvalidArgument("%s is a directory; write_files only writes or deletes files", f.Path)
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
	default:
		return fsError(err, f.Path)
	}
	if f.ExpectAbsent && p.existed {
		return errdefs.FailedPrecondition("%s already exists but was expected to be absent; read it first or drop expect_absent", f.Path)
	}
	if f.Delete && !p.existed {
		return errdefs.NotFound("%s cannot be deleted: it does not exist", f.Path)
	}
	if f.ExpectSHA256 != "" {
		if !p.existed {
			return errdefs.FailedPrecondition("%s no longer exists but was expected to have sha256 %s; read it again", f.Path, f.ExpectSHA256)
		}
		sum, err := fileSHA256(p.root, p.target, f.Path)
		if err != nil {
			return fsError(err, f.Path)
		}
		if !strings.EqualFold(sum, f.ExpectSHA256) {
			return errdefs.FailedPrecondition("%s changed since it was read (sha256 %s, expected %s); read it again before writing", f.Path, sum, f.ExpectSHA256)
		}
	}
	return nil
}

func fileSHA256(root, abs, name string) (string, error) {
	f, err := openBeneath(root, abs, name, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stage opens the target's directory (creating it with mkdir_all) and
// writes the new content to a temporary file in it.
func stage(p *writePlan) error {
	f := p.req
	dir := filepath.Dir(p.target)
	if fi, err := os.Stat(dir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return errdefs.InvalidArgument("the parent of %s is not a directory (%v); fix the path", f.Path, err)
		}
		if f.Delete {
			return errdefs.NotFound("%s cannot be deleted: its directory does not exist", f.Path)
		}
		if !f.MkdirAll {
			return errdefs.NotFound("the directory for %s does not exist; set mkdir_all to create it", f.Path)
		}
		made, err := mkdirAll(p.root, dir, f.Path)
		p.madeDirs = made
		if err != nil {
			return errdefs.InvalidArgument("cannot create the directory for %s (%v); fix the path", f.Path, err)
		}
	} else if !fi.IsDir() {
		return errdefs.InvalidArgument("the parent of %s is a file, not a directory; fix the path", f.Path)
	}
	d, err := openBeneath(p.root, dir, f.Path, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fsError(err, f.Path)
	}
	p.dir = d
	if f.Delete {
		return nil
	}
	base := filepath.Base(p.target)
	mode := fs.FileMode(f.Mode).Perm()
	if f.Mode == 0 {
		mode = 0o644
		var st unix.Stat_t
		if p.existed && unix.Fstatat(int(d.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			mode = fs.FileMode(st.Mode).Perm()
		}
	}
	name := "." + base + ".sbx-" + randomID()
	tmp, err := openatBeneath(int(d.Fd()), name, filepath.Join(dir, name), f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsError(err, f.Path)
	}
	p.tmp = tmp.Name()
	_, werr := tmp.Write(f.Data)
	if werr == nil {
		werr = tmp.Chmod(mode)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fsError(werr, f.Path)
	}
	return nil
}

// mkdirAll creates dir and its missing parents inside root, each made in
// its parent opened beneath root, and returns those it made (deepest last)
// so a rollback can remove them.
func mkdirAll(root, dir, name string) ([]string, error) {
	var missing []string
	base := dir
	for ; base != root && base != filepath.Dir(base); base = filepath.Dir(base) {
		if _, err := os.Lstat(base); err == nil {
			break
		}
		missing = append(missing, base)
	}
	parent, err := openBeneath(root, base, name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { parent.Close() }()
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		comp := filepath.Base(missing[i])
		if err := unix.Mkdirat(int(parent.Fd()), comp, 0o755); err != nil {
			return made, &fs.PathError{Op: "mkdir", Path: missing[i], Err: err}
		}
		made = append(made, missing[i])
		next, err := openatBeneath(int(parent.Fd()), comp, missing[i], name, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return made, err
		}
		parent.Close()
		parent = next
	}
	return made, nil
}

// commit puts one staged entry in place, keeping the old file as a backup;
// every step is relative to the plan's directory.
func commit(p *writePlan) error {
	dfd := int(p.dir.Fd())
	base := filepath.Base(p.target)
	if p.existed {
		backup := base + ".sbx-backup-" + randomID()
		p.backup = filepath.Join(filepath.Dir(p.target), backup)
		if err := unix.Linkat(dfd, base, dfd, backup, 0); err != nil {
			// No hard links here: move the old file aside instead.
			if err := unix.Renameat(dfd, base, dfd, backup); err != nil {
				p.backup = ""
				return fsError(&fs.PathError{Op: "rename", Path: p.target, Err: err}, p.req.Path)
			}
			p.moved = true
		}
	}
	if p.req.Delete {
		if err := unix.Unlinkat(dfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fsError(&fs.PathError{Op: "remove", Path: p.target, Err: err}, p.req.Path)
		}
		p.renamed = true
		return nil
	}
	if err := unix.Renameat(dfd, filepath.Base(p.tmp), dfd, base); err != nil {
		return fsError(&fs.PathError{Op: "rename", Path: p.target, Err: err}, p.req.Path)
	}
	p.tmp = ""
	p.renamed = true
	return nil
}

// rollback restores every target to what it was before the batch.
func rollback(plans []*writePlan) {
	for i := len(plans) - 1; i >= 0; i-- {
		p := plans[i]
		if p == nil {
			continue
		}
		if p.dir != nil {
			dfd := int(p.dir.Fd())
			base, backup := filepath.Base(p.target), filepath.Base(p.backup)
			switch {
			case p.backup != "" && (p.renamed || p.moved):
				_ = unix.Renameat(dfd, backup, dfd, base)
			case p.backup != "":
				_ = unix.Unlinkat(dfd, backup, 0) // a link to the untouched target
			case p.renamed && !p.existed:
				_ = unix.Unlinkat(dfd, base, 0)
			}
			if p.tmp != "" {
				_ = unix.Unlinkat(dfd, filepath.Base(p.tmp), 0)
			}
		}
		for j := len(p.madeDirs) - 1; j >= 0; j-- {
			os.Remove(p.madeDirs[j]) // only succeeds while empty
		}
	}
}
