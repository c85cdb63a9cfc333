package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// syncRounds records the files of each fsync round a batch makes through
// commitEnv.sync, and what the workspace held when each round began.
type syncRounds struct {
	root    string
	names   [][]string // base names per round
	dirMade []bool     // whether root/new existed as the round began
}

func (r *syncRounds) sync(files []*os.File) error {
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f.Name()))
	}
	_, err := os.Stat(filepath.Join(r.root, "new"))
	r.names = append(r.names, names)
	r.dirMade = append(r.dirMade, !errors.Is(err, fs.ErrNotExist))
	return syncFiles(files)
}

func hasName(names []string, pred func(string) bool) bool {
	for _, n := range names {
		if pred(n) {
			return true
		}
	}
	return false
}

// isJournal tells a journal file; it was opened under its hidden name
// (".<key>-<id>.new") and keeps that name in os.File after the rename.
func isJournal(n string) bool {
	return strings.HasSuffix(n, journalSuffix) || strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".new")
}
func isStage(n string) bool { return strings.HasPrefix(n, stagePrefix) }

// A batch that makes no directory fsyncs its plan in the same round as its
// staged file (one round fewer per write); the plan is still durable
// before the commit line, which is the first thing recovery acts on.
func TestPlanSyncedWithTheStagedFiles(t *testing.T) {
	root := writeFixture(t)
	r := &syncRounds{root: root}
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "a.txt", Data: []byte("new a")}}}
	if err := writeFiles(req, commitEnv{journal: testJournal(t), sync: r.sync}); err != nil {
		t.Fatal(err)
	}
	if len(r.names) == 0 {
		t.Fatal("the batch made no fsync round through commitEnv.sync")
	}
	first := r.names[0]
	if !hasName(first, isJournal) || !hasName(first, isStage) {
		t.Errorf("the first fsync round holds %v; want the journal's plan and the staged file together", first)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(got) != "new a" {
		t.Errorf("a.txt holds %q after the batch", got)
	}
}

// A batch that makes a directory fsyncs its plan alone, before the
// directory appears: a crash must never leave a made directory that no
// durable plan can take back.
func TestPlanSyncedBeforeADirectoryIsMade(t *testing.T) {
	root := writeFixture(t)
	r := &syncRounds{root: root}
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "new/c.txt", Data: []byte("c"), MkdirAll: true}}}
	if err := writeFiles(req, commitEnv{journal: testJournal(t), sync: r.sync}); err != nil {
		t.Fatal(err)
	}
	if len(r.names) < 2 {
		t.Fatalf("fsync rounds %v; want the plan alone, then the barrier", r.names)
	}
	if len(r.names[0]) != 1 || !isJournal(r.names[0][0]) {
		t.Errorf("the first fsync round holds %v; want only the journal's plan", r.names[0])
	}
	if r.dirMade[0] {
		t.Error("the directory existed before the plan was fsynced")
	}
	if hasName(r.names[1], isJournal) {
		t.Errorf("the barrier %v fsyncs the plan again", r.names[1])
	}
	if got, _ := os.ReadFile(filepath.Join(root, "new", "c.txt")); string(got) != "c" {
		t.Errorf("new/c.txt holds %q after the batch", got)
	}
}

// Two workspaces' batches share the agent's journal directory but never
// wait for each other: while one is held inside its fsync barrier (a slow
// disk), the other settles its root and commits. A lock shared across
// workspaces would show here as the second batch never finishing.
func TestBatchesOnTwoRootsDoNotQueue(t *testing.T) {
	j := testJournal(t)
	rootA, rootB := writeFixture(t), writeFixture(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := func(files []*os.File) error {
		once.Do(func() { close(entered); <-release })
		return syncFiles(files)
	}
	doneA := make(chan error, 1)
	go func() {
		req := &proto.WriteFilesRequest{Root: rootA, Files: []proto.WriteFile{{Path: "a.txt", Data: []byte("A")}}}
		doneA <- writeFiles(req, commitEnv{journal: j, sync: slow})
	}()
	<-entered
	doneB := make(chan error, 1)
	go func() {
		if err := j.recover(rootB); err != nil {
			doneB <- err
			return
		}
		req := &proto.WriteFilesRequest{Root: rootB, Files: []proto.WriteFile{{Path: "a.txt", Data: []byte("B")}}}
		doneB <- writeFiles(req, commitEnv{journal: j})
	}()
	var errB error
	select {
	case errB = <-doneB:
	case err := <-doneA:
		t.Fatalf("batch A finished (%v) while held in its fsync", err)
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("batch B did not finish within 20 s while batch A was held in its fsync: the roots queue behind each other")
	}
	close(release)
	if errB != nil {
		t.Fatalf("batch B: %v", errB)
	}
	if err := <-doneA; err != nil {
		t.Fatalf("batch A: %v", err)
	}
	for root, want := range map[string]string{rootA: "A", rootB: "B"} {
		if got, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(got) != want {
			t.Errorf("%s/a.txt holds %q, want %q", root, got, want)
		}
	}
	// Root B's settling skipped root A's live journal, and both finished.
	if left := journalsLeft(t, j); len(left) != 0 {
		t.Errorf("journals left: %v", left)
	}
}

// A batch that replaces existing files makes its commit line durable only
// with the targets' directories, after the entries are in place. A crash
// there with the line lost must still settle the batch: recovery rolls it
// back from the plan alone, the old contents under the batch's names.
func TestLateCommitLineRollsBackFromThePlan(t *testing.T) {
	root := writeFixture(t)
	before := snapshotTree(t, root)
	j := testJournal(t)
	var rounds [][]string
	var recovered map[string]string
	var recErr error
	record := func(files []*os.File) error {
		var names []string
		for _, f := range files {
			names = append(names, filepath.Base(f.Name()))
		}
		rounds = append(rounds, names)
		if len(rounds) == 2 {
			// The entries are in place; the commit line is written but
			// not yet durable. A crash now may lose it: recovery must then
			// see a journal holding only the plan.
			left := journalsLeft(t, j)
			if len(left) != 1 {
				t.Fatalf("journals at the last round: %v", left)
			}
			text, err := os.ReadFile(filepath.Join(j.dir, left[0]))
			if err != nil {
				t.Fatal(err)
			}
			plan, _, _ := strings.Cut(string(text), "\n")
			lost := filepath.Join(j.dir, rootKey(root)+"-000000000000"+journalSuffix)
			if err := os.WriteFile(lost, []byte(plan+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			recErr = j.recover(root)
			recovered = snapshotTree(t, root)
		}
		return syncFiles(files)
	}
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "a.txt", Data: []byte("new a")},
		{Path: "gone.txt", Delete: true},
	}}
	_ = writeFiles(req, commitEnv{journal: j, sync: record})
	if len(rounds) != 2 {
		t.Fatalf("fsync rounds through commitEnv.sync: %v; want the barrier, then the commit line with the directories", rounds)
	}
	if !hasName(rounds[1], isJournal) {
		t.Errorf("the last round %v does not hold the journal (its commit line)", rounds[1])
	}
	if recErr != nil {
		t.Fatalf("recovery: %v", recErr)
	}
	for name, want := range before {
		if recovered[name] != want {
			t.Errorf("after recovery %s holds %q, want the old %q", name, recovered[name], want)
		}
	}
}

// The journal of a batch that got its response is removed without an fsync,
// so a power loss may bring it back, with its commit line, and perhaps the
// batch's hidden old file too. Recovery must then leave every later change
// alone: neither put the old file over a later write nor bring back a file
// deleted since, and not fail.
func TestStaleJournalLeavesLaterChanges(t *testing.T) {
	for _, later := range []proto.WriteFile{
		{Path: "a.txt", Data: []byte("two")},
		{Path: "a.txt", Delete: true},
	} {
		t.Run(map[bool]string{false: "write", true: "delete"}[later.Delete], func(t *testing.T) {
			root := writeFixture(t)
			j := testJournal(t)
			var saved, name string
			var stage string
			capture := func(files []*os.File) error {
				if left := journalsLeft(t, j); len(left) == 1 && hasName(namesOf(files), isJournal) && !hasName(namesOf(files), isStage) {
					name = left[0]
					text, err := os.ReadFile(filepath.Join(j.dir, name))
					if err != nil {
						t.Fatal(err)
					}
					saved = string(text)
				}
				return syncFiles(files)
			}
			// A second link keeps the old file's inode, to put it back
			// under the stage name as a lost unlink would leave it.
			oldLink := filepath.Join(root, "..", filepath.Base(root)+"-old")
			if err := os.Link(filepath.Join(root, "a.txt"), oldLink); err != nil {
				t.Skipf("no hard link beside the workspace: %v", err)
			}
			t.Cleanup(func() { os.Remove(oldLink) })
			req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "a.txt", Data: []byte("one")}}}
			if err := writeFiles(req, commitEnv{journal: j, sync: capture}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(saved, `"commit":true`) {
				t.Fatalf("the journal at the last round holds %q; want its commit line", saved)
			}
			plan, _, _ := readJournal(strings.NewReader(saved))
			stage = plan.Entries[0].Stage
			if err := writeFiles(&proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{later}}, commitEnv{journal: j}); err != nil {
				t.Fatal(err)
			}
			// The power loss: the first journal's removal and the unlink
			// of its stage name (which held the old file) were lost.
			if err := os.WriteFile(filepath.Join(j.dir, name), []byte(saved), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(oldLink, filepath.Join(root, stage)); err != nil {
				t.Fatal(err)
			}
			if err := j.recover(root); err != nil {
				t.Fatalf("recovery: %v", err)
			}
			got, err := os.ReadFile(filepath.Join(root, "a.txt"))
			switch {
			case later.Delete && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("a.txt, deleted after the batch, is back holding %q", got)
			case !later.Delete && string(got) != "two":
				t.Errorf("a.txt holds %q (%v), want the later write's \"two\"", got, err)
			}
			if left := journalsLeft(t, j); len(left) != 0 {
				t.Errorf("journals left: %v", left)
			}
		})
	}
}

func namesOf(files []*os.File) []string {
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f.Name()))
	}
	return names
}
