package daemon

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

func testJournal(t *testing.T) *journal {
	t.Helper()
	j, err := openJournal(filepath.Join(t.TempDir(), "state"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func journalsLeft(t *testing.T, j *journal) []string {
	t.Helper()
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// A batch that fails after its commit line (an injected failure before
// the fourth entry) is undone in the process, and its journal goes.
func TestJournaledBatchFailureUndone(t *testing.T) {
	root := writeFixture(t)
	before := snapshotTree(t, root)
	j := testJournal(t)
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "a.txt", Data: []byte("new a")},
		{Path: "gone.txt", Delete: true},
		{Path: "new/dir/c.txt", Data: []byte("c"), MkdirAll: true},
		{Path: "b.txt", Data: []byte("new b")},
	}}
	hook := func(i int) error {
		if i == 3 {
			return errdefs.Internal("injected failure before entry %d", i)
		}
		return nil
	}
	if err := writeFiles(req, commitEnv{journal: j, hook: hook}); err == nil {
		t.Fatal("writeFiles succeeded despite the injected failure")
	}
	if after := snapshotTree(t, root); !maps.Equal(before, after) {
		t.Fatalf("tree changed after a failed batch:\nbefore %v\nafter  %v", before, after)
	}
	if left := journalsLeft(t, j); len(left) != 0 {
		t.Fatalf("journals left after the undo: %v", left)
	}
	// And the same batch then commits whole, leaving no journal either.
	if err := writeFiles(req, commitEnv{journal: j}); err != nil {
		t.Fatal(err)
	}
	got := snapshotTree(t, root)
	if got["a.txt"] != "new a|-rw-------" || got["b.txt"] != "new b|-rw-r--r--" || got["new/dir/c.txt"] != "c|-rw-r--r--" || got["gone.txt"] != "" {
		t.Fatalf("tree after the commit = %v", got)
	}
	if left := journalsLeft(t, j); len(left) != 0 {
		t.Fatalf("journals left after the commit: %v", left)
	}
}

// A journal whose owner is alive (it holds the lock) is never settled by
// another: recovery before an operation must not undo a running batch.
func TestRecoverySkipsALiveBatch(t *testing.T) {
	root := writeFixture(t)
	real, _ := filepath.EvalSymlinks(root)
	j := testJournal(t)
	jf, err := j.begin(real, []journalEntry{{Dir: ".", Name: "a.txt", Stage: stagePrefix + "000000000001", Backup: backupPrefix + "000000000001"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.recover(real); err != nil {
		t.Fatal(err)
	}
	if left := journalsLeft(t, j); len(left) != 1 {
		t.Fatalf("recovery touched a live batch's journal: %v left", left)
	}
	jf.f.Close() // the owner dies: its lock goes with it
	if err := j.recover(real); err != nil {
		t.Fatal(err)
	}
	if left := journalsLeft(t, j); len(left) != 0 {
		t.Fatalf("the dead batch's journal was not settled: %v", left)
	}
}

// A torn journal (a plan never written whole) is dropped, and a torn
// commit line counts as absent: the batch is rolled back.
func TestTornJournalsRollBack(t *testing.T) {
	root := writeFixture(t)
	real, _ := filepath.EvalSymlinks(root)
	before := snapshotTree(t, root)
	j := testJournal(t)
	os.WriteFile(filepath.Join(root, stagePrefix+"0000000000aa"), []byte("new a"), 0o600)
	plan := `{"root":"` + real + `","entries":[{"dir":".","name":"a.txt","stage":"` + stagePrefix + `0000000000aa","backup":"` + backupPrefix + `0000000000aa","old_ino":1}]}`
	os.WriteFile(filepath.Join(j.dir, rootKey(real)+"-1"+journalSuffix), []byte(plan+"\n{\"commit\":tr"), 0o600)
	os.WriteFile(filepath.Join(j.dir, rootKey(real)+"-2"+journalSuffix), []byte(`{"root":"`+real), 0o600)
	if err := j.recover(""); err != nil {
		t.Fatal(err)
	}
	if after := snapshotTree(t, root); !maps.Equal(before, after) {
		t.Fatalf("recovery of an uncommitted batch left\n%v\nwant\n%v", after, before)
	}
	if left := journalsLeft(t, j); len(left) != 0 {
		t.Fatalf("journals left: %v", left)
	}
}
