package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The names a batch keeps beside its targets while it commits. They carry a
// fixed prefix and a random id, so the file operations can recognize and
// hide them (commitTemp) and a batch never meets another's.
const (
	stagePrefix  = ".sandboxd-stage."
	backupPrefix = ".sandboxd-backup."
)

// commitTemp reports whether a file name is one of a commit's hidden files.
func commitTemp(name string) bool {
	var id string
	switch {
	case strings.HasPrefix(name, stagePrefix):
		id = name[len(stagePrefix):]
	case strings.HasPrefix(name, backupPrefix):
		id = name[len(backupPrefix):]
	default:
		return false
	}
	if len(id) != 12 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// inoAt is the inode name in dfd holds, 0 when there is none.
func inoAt(dfd int, name string) uint64 {
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0
	}
	return st.Ino
}

// exchangeUnsupported tells a file system without RENAME_EXCHANGE.
func exchangeUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}

// applyEntry puts e's new state in place in dfd unless it already is there.
// An existing target is swapped with its staged file in one rename
// (RENAME_EXCHANGE), so the old file stays under the stage name, the
// target is never missing and no second link to it appears; where the file
// system cannot exchange, the old file is linked (or moved) to the backup
// name first.
func applyEntry(dfd int, e *journalEntry) error {
	t := inoAt(dfd, e.Name)
	if e.Delete {
		if t != 0 && t == e.OldIno {
			return renameAt(dfd, e.Name, e.Backup, e)
		}
		return nil
	}
	if e.staged != 0 && t == e.staged {
		return nil
	}
	if e.OldIno != 0 && t == e.OldIno {
		err := unix.Renameat2(dfd, e.Stage, dfd, e.Name, unix.RENAME_EXCHANGE)
		if err == nil {
			return nil
		}
		if !exchangeUnsupported(err) {
			return pathErr("rename", e, err)
		}
		if err := unix.Linkat(dfd, e.Name, dfd, e.Backup, 0); err != nil {
			if err := renameAt(dfd, e.Name, e.Backup, e); err != nil {
				return err
			}
		}
	}
	return renameAt(dfd, e.Stage, e.Name, e)
}

// undoEntry puts e's old state back in dfd unless it already is there.
func undoEntry(dfd int, e *journalEntry) error {
	t := inoAt(dfd, e.Name)
	if e.OldIno == 0 {
		if e.staged != 0 && t == e.staged {
			if err := unix.Unlinkat(dfd, e.Name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return pathErr("remove", e, err)
			}
		}
		return nil
	}
	if t == e.OldIno {
		return nil
	}
	for _, n := range []string{e.Stage, e.Backup} {
		if inoAt(dfd, n) == e.OldIno {
			return renameAt(dfd, n, e.Name, e)
		}
	}
	return nil // the old file is in none of our names: nothing to put back
}

// tidyEntry removes e's hidden names once e is settled either way, keeping
// any that still holds the only copy of the old file.
func tidyEntry(dfd int, e *journalEntry) {
	restored := e.OldIno == 0 || inoAt(dfd, e.Name) == e.OldIno
	for _, n := range []string{e.Stage, e.Backup} {
		if ino := inoAt(dfd, n); ino != 0 && (ino != e.OldIno || restored || e.applied(dfd)) {
			_ = unix.Unlinkat(dfd, n, 0)
		}
	}
}

// applied reports whether e's new state is in place.
func (e *journalEntry) applied(dfd int) bool {
	t := inoAt(dfd, e.Name)
	if e.Delete {
		return t == 0 || t != e.OldIno
	}
	return e.staged != 0 && t == e.staged
}

func renameAt(dfd int, from, to string, e *journalEntry) error {
	if err := unix.Renameat(dfd, from, dfd, to); err != nil {
		return pathErr("rename", e, err)
	}
	return nil
}

func pathErr(op string, e *journalEntry, err error) error {
	return &os.PathError{Op: op, Path: e.display, Err: err}
}

// placed reports whether e's staged file has left its stage name, so the
// entry was put in place once, whatever changed the target since. A
// journal whose removal was not yet durable comes back after a power loss
// although its batch got its response (files_write.go removes it without
// fsyncing the journal directory); completing such an entry again would
// put the batch's leftovers (the old file, under the stage name after the
// exchange) over a later change, or bring back a file deleted since.
func (e *journalEntry) placed(dfd int) bool {
	if e.Delete || e.staged == 0 {
		return false // applyEntry moves only the old file itself
	}
	return inoAt(dfd, e.Stage) != e.staged
}

// rollForward completes a batch whose journal has its commit line, except
// entries already put in place.
func rollForward(root string, entries []journalEntry) error {
	// A directory that cannot be opened had its entry's files removed
	// behind the journal's back; there is nothing to complete in it.
	dirs, _ := openEntryDirs(root, entries)
	defer closeDirs(dirs)
	for i := range entries {
		if dirs[i] == nil || entries[i].placed(int(dirs[i].Fd())) {
			continue
		}
		if err := applyEntry(int(dirs[i].Fd()), &entries[i]); err != nil {
			return err
		}
	}
	if err := syncDirs(dirs); err != nil {
		return err
	}
	for i := range entries {
		if dirs[i] != nil {
			tidyEntry(int(dirs[i].Fd()), &entries[i])
		}
	}
	return syncDirs(dirs)
}

// rollBack undoes a batch that never committed, or whose commit aborted.
func rollBack(root string, entries []journalEntry) error {
	dirs, _ := openEntryDirs(root, entries) // a missing directory had nothing staged in it
	defer closeDirs(dirs)
	var first error
	for i := len(entries) - 1; i >= 0; i-- {
		if dirs[i] == nil {
			continue
		}
		if err := undoEntry(int(dirs[i].Fd()), &entries[i]); err != nil && first == nil {
			first = err
		}
		tidyEntry(int(dirs[i].Fd()), &entries[i])
	}
	if first != nil {
		return first
	}
	syncDirs(dirs)
	removeMadeDirs(root, entries)
	return nil
}

// openEntryDirs opens each entry's directory beneath root (nil where it
// cannot be opened); the error is the first failure.
func openEntryDirs(root string, entries []journalEntry) ([]*os.File, error) {
	r, err := openRoot(root)
	if err != nil {
		return make([]*os.File, len(entries)), err
	}
	defer r.close()
	dirs := make([]*os.File, len(entries))
	var first error
	for i, e := range entries {
		abs := filepath.Join(root, e.Dir)
		d, err := r.open(abs, e.display, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		dirs[i] = d
	}
	return dirs, first
}

func closeDirs(dirs []*os.File) {
	for _, d := range dirs {
		if d != nil {
			d.Close()
		}
	}
}

// maxParallelSyncs bounds the goroutines one batch fsyncs with.
const maxParallelSyncs = 16

// syncDirs fsyncs each distinct directory once.
func syncDirs(dirs []*os.File) error {
	seen := map[string]bool{}
	var uniq []*os.File
	for _, d := range dirs {
		if d == nil || seen[d.Name()] {
			continue
		}
		seen[d.Name()] = true
		uniq = append(uniq, d)
	}
	return syncFiles(uniq)
}

// syncFiles fsyncs files side by side: a journaling file system folds
// concurrent fsyncs into few commits of its own journal, where one after
// another each waits for its own.
func syncFiles(files []*os.File) error {
	if len(files) == 1 {
		return files[0].Sync()
	}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelSyncs)
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f.Sync()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// removeMadeDirs removes, deepest first, the directories the batch made,
// each only while empty.
func removeMadeDirs(root string, entries []journalEntry) {
	var made []string
	for _, e := range entries {
		made = append(made, e.MkDirs...)
	}
	if len(made) == 0 {
		return
	}
	slices.SortFunc(made, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	made = slices.Compact(made)
	r, err := openRoot(root)
	if err != nil {
		return
	}
	defer r.close()
	for _, m := range made {
		parent := filepath.Join(root, filepath.Dir(m))
		d, err := r.open(parent, m, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		_ = unix.Unlinkat(int(d.Fd()), filepath.Base(m), unix.AT_REMOVEDIR)
		d.Sync()
		d.Close()
	}
}
