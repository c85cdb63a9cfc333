package daemon

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A write_files batch is made crash-atomic by a journal the agent keeps
// outside the workspace (its state dir, which survives an agent kill and
// a container restart). The journal of one batch is a file of JSON lines:
//
//	plan    written and fsynced before anything in the workspace changes:
//	        every entry's directory, names and old inode (its directory
//	        entry is fsynced with the staged files, before the commit line)
//	commit  appended once every staged file is fsynced: the staged inodes;
//	        fsynced with the targets' directories once the entries are in
//	        place, before the response to the batch
//	abort   appended when the batch failed after its commit line
//
// A journal left behind by a killed agent is rolled forward when it has a
// commit line and no abort line (every staged file is durable, so the new
// tree can always be completed) and rolled back otherwise. The journal of
// a finished batch is removed without an fsync, so after a power loss one
// may come back whose batch got its response; rolling it forward leaves every
// entry already put in place, and so every later change. Recovery looks at
// what each name holds now (by inode), so running it again, or after a
// partial recovery, is harmless. The live owner of a journal holds an
// exclusive flock on it; recovery skips journals whose lock is held.

const (
	journalSuffix = ".journal"
	// maxJournal caps what recovery reads of one journal.
	maxJournal = 64 << 20
)

// journalEntry is one file of a batch as the journal records it. Dir and
// MkDirs are relative to the root; names are single components in Dir.
type journalEntry struct {
	Dir     string   `json:"dir"`
	Name    string   `json:"name"`
	Stage   string   `json:"stage"`
	Backup  string   `json:"backup"`
	Delete  bool     `json:"delete,omitempty"`
	OldIno  uint64   `json:"old_ino,omitempty"` // 0: the target did not exist
	MkDirs  []string `json:"mkdirs,omitempty"`  // made for this entry, shallowest first
	staged  uint64   // the staged file's inode, once known
	display string   // the request's path, for messages
}

type journalPlan struct {
	Root    string         `json:"root"`
	Entries []journalEntry `json:"entries"`
}

type journalMark struct {
	Commit bool     `json:"commit,omitempty"`
	Staged []uint64 `json:"staged,omitempty"`
	Abort  bool     `json:"abort,omitempty"`
}

// journal is the agent's directory of commit journals.
type journal struct {
	dir string
	log *slog.Logger
	// broken is why dir cannot be used; every batch then fails with it.
	broken error
}

// openJournal makes (if needed) the state dir dir, private to the agent.
func openJournal(dir string, log *slog.Logger) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the agent's journal directory %s: %w", dir, err)
	}
	return &journal{dir: dir, log: log}, nil
}

// rootKey names a root's journals, so recovery before an operation on one
// workspace reads only its own.
func rootKey(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:8])
}

// journalFile is one batch's journal, held locked by its writer.
type journalFile struct {
	j    *journal
	f    *os.File
	path string
	// planSynced is set once the plan line is fsynced on its own.
	planSynced bool
}

// begin writes the plan of a batch on root and returns its locked journal.
// The file is made and locked under a name recovery ignores, then renamed
// into view, so recovery never sees a journal whose owner is still alive
// without its lock. The plan is not fsynced here: the caller does it
// before the batch changes a name anyone sees (files_write.go), alone when the
// batch makes directories and otherwise with the staged files' barrier,
// saving one fsync round per batch.
func (j *journal) begin(root string, entries []journalEntry) (*journalFile, error) {
	if j.broken != nil {
		return nil, j.broken
	}
	line, err := json.Marshal(journalPlan{Root: root, Entries: entries})
	if err != nil {
		return nil, err
	}
	name := rootKey(root) + "-" + randomID()
	tmp := filepath.Join(j.dir, "."+name+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create a commit journal in %s: %w", j.dir, err)
	}
	jf := &journalFile{j: j, f: f, path: tmp}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
	}
	if err == nil {
		final := filepath.Join(j.dir, name+journalSuffix)
		// The new entry is made durable with the staged files, before the
		// commit line (files_write.go's barrier): until then a lost journal
		// leaves only hidden stage files, never a changed target.
		if err = os.Rename(tmp, final); err == nil {
			jf.path = final
		}
	}
	if err != nil {
		jf.remove()
		return nil, fmt.Errorf("cannot write the commit journal %s: %w", jf.path, err)
	}
	return jf, nil
}

// mark appends a commit or abort line and fsyncs it.
func (jf *journalFile) mark(m journalMark) error {
	if err := jf.write(m); err != nil {
		return err
	}
	return jf.f.Sync()
}

// write appends a commit or abort line without fsyncing it; the caller
// makes it durable (files_write.go fsyncs the commit line with the targets'
// directories).
func (jf *journalFile) write(m journalMark) error {
	line, _ := json.Marshal(m)
	_, err := jf.f.Write(append(line, '\n'))
	return err
}

// finish removes a settled journal; the directory is fsynced so that a
// journal seen after a crash is always one whose batch never got a response.
func (jf *journalFile) finish() error {
	err := os.Remove(jf.path)
	if err == nil {
		err = syncDir(jf.j.dir)
	}
	jf.f.Close()
	return err
}

// release removes the journal of a batch that is durably in place,
// without fsyncing the journal directory: the removal becomes durable with
// the directory's next fsync (the next batch's barrier). One that comes
// back after a power loss is rolled forward, which leaves alone every
// entry already put in place (rollForward), so it costs the response no
// fsync round.
func (jf *journalFile) release() error {
	err := os.Remove(jf.path)
	jf.f.Close()
	return err
}

// remove drops a journal nothing was done under.
func (jf *journalFile) remove() {
	os.Remove(jf.path)
	jf.f.Close()
}

// recover settles every unfinished journal whose root is root ("" for all
// of them) and whose owner is gone. It returns the first failure; a journal
// that cannot be settled stays for the next attempt.
func (j *journal) recover(root string) error {
	d, err := os.Open(j.dir)
	if err != nil {
		return fmt.Errorf("cannot read the journal directory %s: %w", j.dir, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("cannot read the journal directory %s: %w", j.dir, err)
	}
	prefix := ""
	if root != "" {
		prefix = rootKey(root) + "-"
	}
	var first error
	for _, n := range names {
		if !strings.HasSuffix(n, journalSuffix) || !strings.HasPrefix(n, prefix) {
			continue
		}
		if err := j.settle(filepath.Join(j.dir, n)); err != nil {
			j.log.Warn("an unfinished commit could not be settled", "journal", n, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// settle recovers one journal unless its owner still holds it.
func (j *journal) settle(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // finished meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil // its batch is running
		}
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Nlink == 0 {
		return nil // its owner finished and removed it while we opened it
	}
	plan, mark, ok := readJournal(f)
	if !ok {
		// A plan that was never completely written: nothing in the
		// workspace was touched under it.
		j.log.Warn("removing a commit journal whose plan was never completed", "journal", path)
		return j.drop(path)
	}
	root, err := resolveRoot(plan.Root)
	if err != nil || root != plan.Root {
		return fmt.Errorf("the workspace %s of an unfinished commit is not available (%v)", plan.Root, err)
	}
	forward := mark.Commit && !mark.Abort
	for i := range plan.Entries {
		if i < len(mark.Staged) {
			plan.Entries[i].staged = mark.Staged[i]
		}
		plan.Entries[i].display = filepath.Join(plan.Entries[i].Dir, plan.Entries[i].Name)
	}
	if forward {
		err = rollForward(root, plan.Entries)
	} else {
		err = rollBack(root, plan.Entries)
	}
	if err != nil {
		return err
	}
	j.log.Info("settled an unfinished commit", "journal", path, "root", root, "forward", forward, "files", len(plan.Entries))
	return j.drop(path)
}

func (j *journal) drop(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(j.dir)
}

// readJournal parses a journal; ok is false when its plan line is torn.
// A torn mark line counts as absent: it was never fsynced whole.
func readJournal(r io.Reader) (journalPlan, journalMark, bool) {
	var plan journalPlan
	var mark journalMark
	sc := bufio.NewScanner(io.LimitReader(r, maxJournal))
	sc.Buffer(make([]byte, 64<<10), maxJournal)
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &plan) != nil || plan.Root == "" {
		return plan, mark, false
	}
	for sc.Scan() {
		var m journalMark
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			break
		}
		if m.Commit && len(m.Staged) == len(plan.Entries) {
			mark.Commit, mark.Staged = true, m.Staged
		}
		if m.Abort {
			mark.Abort = true
		}
	}
	return plan, mark, true
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
