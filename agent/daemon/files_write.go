package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// commitEnv is what a write_files batch needs from the file service.
type commitEnv struct {
	// journal makes the batch crash-atomic; nil commits without one (an
	// embedded daemon without a state dir, and the benchmark's baseline).
	journal *journal
	// hook runs before entry i is put in place; test-only fault injection.
	hook func(int) error
	// limits apply to the expectation hashing's reads.
	limits readLimits
	// sync fsyncs files side by side; nil is syncFiles. Tests record
	// through it which files each fsync round held.
	sync func(files []*os.File) error
}

func (env commitEnv) syncFiles(files []*os.File) error {
	if env.sync != nil {
		return env.sync(files)
	}
	return syncFiles(files)
}

// writePlan is one entry of a write_files batch on its way to disk.
type writePlan struct {
	req    *proto.WriteFile
	root   string // the resolved root
	target string // resolved path
	// dir is the target's directory, opened beneath the root without
	// following symlinks; every change to the target is made relative to
	// it, so a directory swapped for a symlink after the check cannot
	// redirect the write.
	dir     *os.File
	existed bool
	// owner is the account new files and directories belong to
	// (WriteFilesRequest.Owner); nil leaves them to the agent's user.
	owner  *account
	entry  journalEntry
	staged *os.File // the staged file, open until the barrier
	// made are the directories this batch made itself (relative to the
	// root), the ones an undo removes. entry.MkDirs, the plan, may list
	// more: a directory another batch made meanwhile (two writes of files
	// in one new directory) is still fsynced in its parent by this batch,
	// but removing it would pull it from under the other batch's file.
	made []string
}

// writeFiles applies a batch all or nothing: check every expectation, write
// the plan to the journal, stage every new content beside its target
// (fsynced), mark the journal committed, then put the entries in place one
// by one. A failure puts back everything already changed; a crash at any
// point is settled from the journal (see journal.go) when the agent starts
// or before the next operation on the workspace.
//
// The plan must be durable before the batch changes a name anyone sees.
// Staging only adds hidden names (which a lost plan leaves behind, never
// read or listed, as a lost journal entry already may), so the plan is
// fsynced together with the staged files in the barrier; only a batch that
// makes directories, which are seen, fsyncs its plan alone first. A batch
// that only replaces or deletes existing files fsyncs its commit line with
// the targets' directories (lateCommit below). No batch fsyncs its
// journal's removal (journalFile.release). A write or edit of an existing
// file so waits for two fsync rounds — the barrier; the commit line with
// the targets' directories — where it waited for five, and it holds its
// conversation's turn (tools/serial.go) through all of them: under load
// those rounds were where a conversation's writes queued.
func writeFiles(r *proto.WriteFilesRequest, env commitEnv) (err error) {
	if len(r.Files) == 0 {
		return errdefs.InvalidArgument("write_files has no files; list at least one")
	}
	realRoot, err := resolveRoot(r.Root)
	if err != nil {
		return err
	}
	owner, err := lookupAccount(r.Owner)
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
		if commitTemp(filepath.Base(c.abs)) {
			return errdefs.InvalidArgument("path %q has the name of a file the agent keeps while it commits a write; choose another name", f.Path)
		}
		if prev, dup := seen[c.abs]; dup {
			return errdefs.InvalidArgument("paths %q and %q name the same file; list each file once", prev, f.Path)
		}
		seen[c.abs] = f.Path
		if err := checkXattrs(f); err != nil {
			return err
		}
		p := &writePlan{req: f, root: realRoot, target: c.abs, owner: owner}
		plans[i] = p
		if err := checkExpectations(p, env.limits); err != nil {
			return err
		}
		if err := planDirs(p); err != nil {
			return err
		}
	}
	entries := make([]journalEntry, len(plans))
	for i, p := range plans {
		entries[i] = p.entry
	}
	var jf *journalFile
	if env.journal != nil {
		if jf, err = env.journal.begin(realRoot, entries); err != nil {
			return errdefs.Unavailable("the write was not made: %v; check the agent's state dir and retry", err)
		}
		if makesDirs(plans) {
			if err := env.syncFiles([]*os.File{jf.f}); err != nil {
				jf.remove()
				return errdefs.Unavailable("the write was not made: the commit journal %s cannot be fsynced (%v); check the agent's state dir and retry", jf.path, err)
			}
			jf.planSynced = true
		}
		commitPoint(realRoot, "planned")
	}
	committed := false
	// lateCommit: the commit line is fsynced with the targets' directories
	// after the entries are in place, not alone before. Until the response a
	// crash may settle the batch either way, and without a durable commit
	// line recovery rolls back whatever of it reached the disk — which it
	// can do from the plan alone when every entry replaces or deletes an
	// existing file (the old inode is in the plan and keeps a name of the
	// batch). A new file is known to recovery only by its staged inode,
	// which the commit line carries, so a batch that creates one makes the
	// line durable first.
	lateCommit := jf != nil && onlyExisting(plans)
	defer func() {
		if err != nil {
			err = abandon(plans, jf, committed, err)
		}
		for _, p := range plans {
			if p.staged != nil {
				p.staged.Close()
			}
			if p.dir != nil {
				p.dir.Close()
			}
		}
	}()
	for _, p := range plans {
		if err := stage(p); err != nil {
			return err
		}
	}
	if err := barrier(plans, jf, env); err != nil {
		return errdefs.Internal("cannot fsync the staged files: %v", err)
	}
	if jf != nil {
		commitPoint(realRoot, "staged")
		staged := make([]uint64, len(plans))
		for i, p := range plans {
			staged[i] = p.entry.staged
		}
		// From here the commit line may be on disk, even if its write
		// fails: an undo must then record its abort first.
		committed = true
		m := journalMark{Commit: true, Staged: staged}
		if lateCommit {
			err = jf.write(m)
		} else {
			err = jf.mark(m)
		}
		if err != nil {
			return errdefs.Internal("cannot record the commit in the journal %s: %v", jf.path, err)
		}
		commitPoint(realRoot, "committed")
	}
	for i, p := range plans {
		if env.hook != nil {
			if err := env.hook(i); err != nil {
				return err
			}
		}
		if err := applyEntry(int(p.dir.Fd()), &p.entry); err != nil {
			return fsError(err, p.req.Path)
		}
		commitPoint(realRoot, "applied:"+strconv.Itoa(i))
	}
	dirs, _, _ := planDirFiles(plans, false)
	if lateCommit {
		// The commit line and the entries in place become durable in one
		// round; the journal may go only after both.
		if err := env.syncFiles(append(uniqueFiles(dirs), jf.f)); err != nil {
			return errdefs.Internal("cannot make the commit durable (the journal %s and the targets' directories): %v", jf.path, err)
		}
	} else {
		_ = env.syncFiles(uniqueFiles(dirs))
	}
	commitPoint(realRoot, "synced")
	for _, p := range plans {
		tidyEntry(int(p.dir.Fd()), &p.entry)
	}
	if jf != nil {
		// The hidden files' removal need not be durable: one that comes
		// back after a power loss is never listed or read.
		commitPoint(realRoot, "cleaned")
		if err := jf.release(); err != nil {
			// The batch is in place; a journal that could not be removed
			// is settled (forward, a no-op) on the next operation.
			return nil
		}
		commitPoint(realRoot, "done")
	}
	return nil
}

// abandon undoes a failed batch and returns the error to report. After the
// commit line, an abort line goes first, so that a crash during the undo
// is settled backwards too; if even that cannot be written, the batch is
// left to recovery, which completes it.
func abandon(plans []*writePlan, jf *journalFile, committed bool, cause error) error {
	if jf != nil && committed {
		if err := jf.mark(journalMark{Abort: true}); err != nil {
			jf.f.Close() // unlocked: the next operation on the workspace settles it forward
			return errdefs.Internal("%v; the batch could not be undone (%v) and will be completed when the workspace is next used", cause, err)
		}
	}
	var first error
	for i := len(plans) - 1; i >= 0; i-- {
		p := plans[i]
		if p == nil || p.dir == nil {
			continue
		}
		if err := undoEntry(int(p.dir.Fd()), &p.entry); err != nil && first == nil {
			first = err
		}
		tidyEntry(int(p.dir.Fd()), &p.entry)
	}
	entries := make([]journalEntry, 0, len(plans))
	for _, p := range plans {
		if p != nil {
			e := p.entry
			e.MkDirs = p.made // only what this batch made (recovery, from the plan, removes a listed directory only while empty)
			entries = append(entries, e)
		}
	}
	if len(plans) > 0 && plans[0] != nil {
		removeMadeDirs(plans[0].root, entries)
	}
	if jf != nil {
		if first != nil {
			jf.f.Close() // left for recovery to undo the rest
		} else {
			_ = jf.finish()
		}
	}
	return cause
}

func checkExpectations(p *writePlan, lim readLimits) error {
	f := p.req
	fi, err := os.Lstat(p.target)
	switch {
	case err == nil:
		p.existed = true
		if fi.IsDir() {
			return errdefs.InvalidArgument("%s is a directory; write_files only writes or deletes files", f.Path)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			p.entry.OldIno = st.Ino
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
		sum, err := fileSHA256(p.root, p.target, f.Path, lim)
		if err != nil {
			return fsError(err, f.Path)
		}
		if !strings.EqualFold(sum, f.ExpectSHA256) {
			return errdefs.FailedPrecondition("%s changed since it was read (sha256 %s, expected %s); read it again before writing", f.Path, sum, f.ExpectSHA256)
		}
	}
	return nil
}

func fileSHA256(root, abs, name string, lim readLimits) (string, error) {
	r, err := openRoot(root)
	if err != nil {
		return "", err
	}
	defer r.close()
	f, _, err := r.openRegular(abs, name, lim)
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

// planDirs checks the target's directory and fills in the entry the
// journal records: where it is, its hidden names and the directories the
// batch will make for it.
func planDirs(p *writePlan) error {
	f := p.req
	dir := filepath.Dir(p.target)
	rel, _ := filepath.Rel(p.root, dir)
	id := randomID()
	p.entry = journalEntry{
		Dir: rel, Name: filepath.Base(p.target), Stage: stagePrefix + id, Backup: backupPrefix + id,
		Delete: f.Delete, OldIno: p.entry.OldIno, display: f.Path,
	}
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return errdefs.InvalidArgument("the parent of %s is a file, not a directory; fix the path", f.Path)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return errdefs.InvalidArgument("the parent of %s is not a directory (%v); fix the path", f.Path, err)
	}
	if f.Delete {
		return errdefs.NotFound("%s cannot be deleted: its directory does not exist", f.Path)
	}
	if !f.MkdirAll {
		return errdefs.NotFound("the directory for %s does not exist; set mkdir_all to create it", f.Path)
	}
	for d := dir; d != p.root && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		r, _ := filepath.Rel(p.root, d)
		p.entry.MkDirs = append([]string{r}, p.entry.MkDirs...)
	}
	return nil
}

// stage opens the target's directory (making what planDirs found missing)
// and writes the new content, fsynced, under the entry's stage name.
func stage(p *writePlan) error {
	f := p.req
	dir := filepath.Dir(p.target)
	if len(p.entry.MkDirs) > 0 {
		made, err := mkdirAll(p.root, dir, f.Path, p.owner)
		for _, m := range made {
			if r, rerr := filepath.Rel(p.root, m); rerr == nil {
				p.made = append(p.made, r)
			}
		}
		var ce chownError
		if errors.As(err, &ce) {
			return ce.error
		}
		if err != nil {
			return errdefs.InvalidArgument("cannot create the directory for %s (%v); fix the path", f.Path, err)
		}
	}
	d, err := openBeneath(p.root, dir, f.Path, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fsError(err, f.Path)
	}
	p.dir = d
	if f.Delete {
		return nil
	}
	mode := fs.FileMode(f.Mode).Perm()
	if f.Mode == 0 {
		mode = 0o644
		var st unix.Stat_t
		if p.existed && unix.Fstatat(int(d.Fd()), p.entry.Name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			mode = fs.FileMode(st.Mode).Perm()
		}
	}
	name := p.entry.Stage
	tmp, err := openatBeneath(int(d.Fd()), name, filepath.Join(dir, name), f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsError(err, f.Path)
	}
	// Owner and attributes before the name is taken: the file is never
	// seen as root's, nor without its metadata. The mode last, as a chown
	// clears the set-id bits.
	werr := p.chownStaged(tmp, int(d.Fd()))
	if werr == nil {
		_, werr = tmp.Write(f.Data)
	}
	if werr == nil {
		werr = setXattrs(tmp, f.Xattrs, dir, f.Path)
	}
	if werr == nil {
		werr = tmp.Chmod(mode)
	}
	if werr == nil {
		var st unix.Stat_t
		if werr = unix.Fstat(int(tmp.Fd()), &st); werr == nil {
			p.entry.staged = st.Ino
		}
	}
	if werr != nil {
		tmp.Close()
		return fsError(werr, f.Path)
	}
	p.staged = tmp
	return nil
}

// chownStaged gives the staged file to the batch's owner or, when it
// replaces a file, to that file's owner; without an owner it stays the
// agent's, as every staged file was.
func (p *writePlan) chownStaged(tmp *os.File, dirfd int) error {
	if p.owner == nil {
		return nil
	}
	uid, gid := int(p.owner.uid), int(p.owner.gid)
	var st unix.Stat_t
	if p.existed && unix.Fstatat(dirfd, p.entry.Name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		uid, gid = int(st.Uid), int(st.Gid)
	}
	if err := tmp.Chown(uid, gid); err != nil {
		return errdefs.FailedPrecondition("cannot give %s to user %q (%v); write it without an owner", p.req.Path, p.owner.name, err)
	}
	return nil
}

// chownError is mkdirAll's failure to give a directory to its owner, which
// its caller reports as it is: the path was fine.
type chownError struct{ error }

// uniqueFiles drops repeated files (several entries in one directory).
func uniqueFiles(files []*os.File) []*os.File {
	seen := map[string]bool{}
	var out []*os.File
	for _, f := range files {
		if f != nil && !seen[f.Name()] {
			seen[f.Name()] = true
			out = append(out, f)
		}
	}
	return out
}

// onlyExisting reports whether every entry of a batch replaces or deletes
// a file that exists.
func onlyExisting(plans []*writePlan) bool {
	for _, p := range plans {
		if !p.existed || p.entry.OldIno == 0 {
			return false
		}
	}
	return true
}

// makesDirs reports whether a batch creates directories.
func makesDirs(plans []*writePlan) bool {
	for _, p := range plans {
		if len(p.entry.MkDirs) > 0 {
			return true
		}
	}
	return false
}

// barrier fsyncs what must be durable before a batch may commit: every
// staged file and, with a journal, the directories holding them, the
// parents of the directories made, the journal's own directory (its new
// entry) and, unless writeFiles synced it already, the journal's plan.
// The staged files are closed after.
func barrier(plans []*writePlan, jf *journalFile, env commitEnv) error {
	var files, opened []*os.File
	defer func() {
		for _, f := range opened {
			f.Close()
		}
		for _, p := range plans {
			p.staged = nil
		}
	}()
	for _, p := range plans {
		if p.staged != nil {
			files = append(files, p.staged)
			opened = append(opened, p.staged)
		}
	}
	if jf != nil {
		dirs, extra, err := planDirFiles(plans, true)
		opened = append(opened, extra...)
		if err != nil {
			return err
		}
		jd, err := os.Open(jf.j.dir)
		if err != nil {
			return err
		}
		opened = append(opened, jd)
		files = append(append(files, dirs...), jd)
		if !jf.planSynced {
			files = append(files, jf.f)
		}
	}
	return env.syncFiles(files)
}

// planDirFiles lists the directories a batch changes: the targets' and,
// with made, the first existing ancestor of the directories it made (a
// made directory's entry lives in its parent, itself made or that
// ancestor). extra are the ones opened here, for the caller to close.
func planDirFiles(plans []*writePlan, made bool) (dirs, extra []*os.File, err error) {
	for _, p := range plans {
		if p != nil && p.dir != nil {
			dirs = append(dirs, p.dir)
		}
	}
	if !made {
		return dirs, nil, nil
	}
	for _, p := range plans {
		if p == nil || len(p.entry.MkDirs) == 0 {
			continue
		}
		top := filepath.Join(p.root, filepath.Dir(p.entry.MkDirs[0]))
		d, err := openBeneath(p.root, top, p.req.Path, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return dirs, extra, err
		}
		extra = append(extra, d)
		dirs = append(dirs, d)
	}
	return dirs, extra, nil
}

// mkdirAll creates dir and its missing parents inside root, each made in
// its parent opened beneath root and, with an owner, given to it before
// anything is made inside; it returns those it made (deepest last).
func mkdirAll(root, dir, name string, owner *account) ([]string, error) {
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
		switch err := unix.Mkdirat(int(parent.Fd()), comp, 0o755); {
		case err == nil:
			made = append(made, missing[i])
			if owner != nil {
				if err := unix.Fchownat(int(parent.Fd()), comp, int(owner.uid), int(owner.gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return made, chownError{errdefs.FailedPrecondition("cannot give the directory %s to user %q (%v); write without an owner", missing[i], owner.name, err)}
				}
			}
		case errors.Is(err, unix.EEXIST):
			// Another write made it since the Lstat above: use it (the
			// open below refuses it unless it is a directory beneath).
		default:
			return made, &fs.PathError{Op: "mkdir", Path: missing[i], Err: err}
		}
		next, err := openatBeneath(int(parent.Fd()), comp, missing[i], name, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return made, err
		}
		parent.Close()
		parent = next
	}
	return made, nil
}
