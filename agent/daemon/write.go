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

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// writePlan is one entry of a write_files batch on its way to disk.
type writePlan struct {
	req      *proto.WriteFile
	target   string // resolved path
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
		p := &writePlan{req: f, target: c.abs}
		if err := checkExpectations(p); err != nil {
			return err
		}
		plans[i] = p
	}
	defer func() {
		if err != nil {
			rollback(plans)
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
			os.Remove(p.backup)
		}
		syncDir(filepath.Dir(p.target))
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
		sum, err := fileSHA256(p.target)
		if err != nil {
			return fsError(err, f.Path)
		}
		if !strings.EqualFold(sum, f.ExpectSHA256) {
			return errdefs.FailedPrecondition("%s changed since it was read (sha256 %s, expected %s); read it again before writing", f.Path, sum, f.ExpectSHA256)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
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

// stage writes the new content to a temporary file in the target's directory.
func stage(p *writePlan) error {
	f := p.req
	if f.Delete {
		return nil
	}
	dir := filepath.Dir(p.target)
	if fi, err := os.Stat(dir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return errdefs.InvalidArgument("the parent of %s is not a directory (%v); fix the path", f.Path, err)
		}
		if !f.MkdirAll {
			return errdefs.NotFound("the directory for %s does not exist; set mkdir_all to create it", f.Path)
		}
		made, err := mkdirAll(dir)
		p.madeDirs = made
		if err != nil {
			return errdefs.InvalidArgument("cannot create the directory for %s (%v); fix the path", f.Path, err)
		}
	} else if !fi.IsDir() {
		return errdefs.InvalidArgument("the parent of %s is a file, not a directory; fix the path", f.Path)
	}
	mode := fs.FileMode(f.Mode).Perm()
	if f.Mode == 0 {
		mode = 0o644
		if p.existed {
			if fi, err := os.Stat(p.target); err == nil {
				mode = fi.Mode().Perm()
			}
		}
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p.target)+".sbx-*")
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

// mkdirAll creates dir and its missing parents, returning those it made
// (deepest last) so a rollback can remove them.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// commit puts one staged entry in place, keeping the old file as a backup.
func commit(p *writePlan) error {
	if p.existed {
		p.backup = p.target + ".sbx-backup-" + randomID()
		if err := os.Link(p.target, p.backup); err != nil {
			// No hard links here: move the old file aside instead.
			if err := os.Rename(p.target, p.backup); err != nil {
				p.backup = ""
				return fsError(err, p.req.Path)
			}
			p.moved = true
		}
	}
	if p.req.Delete {
		if err := os.Remove(p.target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, p.req.Path)
		}
		p.renamed = true
		return nil
	}
	if err := os.Rename(p.tmp, p.target); err != nil {
		return fsError(err, p.req.Path)
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
		switch {
		case p.backup != "" && (p.renamed || p.moved):
			os.Rename(p.backup, p.target)
		case p.backup != "":
			os.Remove(p.backup) // a link to the untouched target
		case p.renamed && !p.existed:
			os.Remove(p.target)
		}
		if p.tmp != "" {
			os.Remove(p.tmp)
		}
		for j := len(p.madeDirs) - 1; j >= 0; j-- {
			os.Remove(p.madeDirs[j]) // only succeeds while empty
		}
	}
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
