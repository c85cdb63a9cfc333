package astgrep_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep"
)

// replica is a second, fresh set of tools (another sandboxd replica) over
// the same sandbox: the same agent daemon through a session of its own,
// the same clock and the same run, and no prepared edit in memory.
func (s *sandbox) replica(opts ...astgrep.Option) *sandbox {
	s.t.Helper()
	return s.replicaAs("sb1", opts...)
}

// replicaAs is replica with the connection naming the sandbox id.
func (s *sandbox) replicaAs(id string, opts ...astgrep.Option) *sandbox {
	s.t.Helper()
	r := &sandbox{t: s.t, ws: s.ws, eng: s.eng, clock: s.clock, srv: s.srv, editDir: s.editDir}
	client := agenttest.Connect(s.t, s.srv)
	conn := &tools.SandboxConn{ID: id, Backend: "test", Workspace: s.ws, Agent: client}
	r.reg = tools.NewRegistry()
	ts, drop := astgrep.Tools(s.eng, append([]astgrep.Option{astgrep.WithClock(s.clock.Now), astgrep.WithEditDir(s.editDir)}, opts...)...)
	for _, tool := range ts {
		r.reg.Register(tool)
	}
	r.dropRun = drop
	run := *s.env.Run
	r.env = &tools.Env{
		Run:        &run,
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	return r
}

// copies lists the edit files kept in the sandbox.
func (s *sandbox) copies() []string {
	s.t.Helper()
	ents, err := os.ReadDir(s.editDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestEditPreparedOnOneReplicaIsAcceptedOnAnother(t *testing.T) {
	a := newSandbox(t)
	a.write("a.go", "package a\n\nvar _ = old(1)\n")
	a.write("b/b.go", "package b\n\nvar _ = old(2)\n")
	id := editID(t, a.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "language": "go"}))
	if got := a.copies(); len(got) != 1 || got[0] != id+".json" {
		t.Fatalf("sandbox copies after ast_edit = %v, want [%s.json]", got, id)
	}
	if _, err := os.Stat(filepath.Join(a.ws, ".sandboxd-edits")); err == nil {
		t.Error("the copy landed in the workspace")
	}
	b := a.replica()
	res := b.ok("resolve", map[string]any{"edit_id": id, "action": "accept"})
	if !strings.Contains(res, "applied "+id+": 2 replacements in 2 files") {
		t.Errorf("resolve on the second replica: %s", res)
	}
	if got := a.read("b/b.go"); got != "package b\n\nvar _ = new(2)\n" {
		t.Errorf("b/b.go = %q", got)
	}
	if got := a.copies(); len(got) != 0 {
		t.Errorf("sandbox copies after accept = %v, want none", got)
	}
	// Resolved once is resolved for every replica.
	for _, r := range []*sandbox{a, b} {
		if out := r.fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
			t.Errorf("second accept: %s", out)
		}
	}
}

func TestReplicaDiscardRemovesTheCopy(t *testing.T) {
	a := newSandbox(t)
	a.write("a.go", "package p\n\nvar _ = old(1)\n")
	id := editID(t, a.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}))
	b := a.replica()
	if out := b.ok("resolve", map[string]any{"edit_id": id, "action": "discard"}); !strings.Contains(out, "discarded "+id) {
		t.Errorf("discard: %s", out)
	}
	if got := a.copies(); len(got) != 0 {
		t.Errorf("sandbox copies after discard = %v, want none", got)
	}
	if a.read("a.go") != "package p\n\nvar _ = old(1)\n" {
		t.Error("discard wrote the file")
	}
	// Discarded on the memory path of the first replica too.
	id = editID(t, a.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}))
	a.ok("resolve", map[string]any{"edit_id": id, "action": "discard"})
	if got := a.copies(); len(got) != 0 {
		t.Errorf("sandbox copies after a memory discard = %v, want none", got)
	}
}

func TestReplicaRefusesExpiredAndOtherRunsCopies(t *testing.T) {
	a := newSandbox(t, astgrep.WithEditLimits(time.Minute, 4, 1<<20))
	a.write("a.go", "package p\n\nvar _ = old(1)\n")
	args := map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}

	other := editID(t, a.ok("ast_edit", args))
	b := a.replica(astgrep.WithEditLimits(time.Minute, 4, 1<<20))
	b.env.Run.ID = "r2"
	if out := b.fail("resolve", map[string]any{"edit_id": other, "action": "accept"}); !strings.Contains(out, "is not a prepared edit of this run") {
		t.Errorf("another run's copy: %s", out)
	}
	if a.read("a.go") != "package p\n\nvar _ = old(1)\n" {
		t.Fatal("another run's copy was written")
	}
	b.env.Run.ID = "r1"

	a.clock.Advance(2 * time.Minute)
	if out := b.fail("resolve", map[string]any{"edit_id": other, "action": "accept"}); !strings.Contains(out, "expired (prepared edits live 1m0s)") {
		t.Errorf("expired copy: %s", out)
	}
	if got := a.copies(); len(got) != 0 {
		t.Errorf("an expired copy stayed after it was refused: %v", got)
	}
	if a.read("a.go") != "package p\n\nvar _ = old(1)\n" {
		t.Error("an expired copy was written")
	}
	// An id that is not one ast_edit makes never reaches the file system.
	if out := b.fail("resolve", map[string]any{"edit_id": "../../a.go", "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("path-like id: %s", out)
	}
}

func TestRunEndRemovesItsCopies(t *testing.T) {
	a := newSandbox(t)
	a.write("a.go", "package p\n\nvar _ = old(1)\n")
	id := editID(t, a.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}))
	a.dropRun("r1")
	if got := a.copies(); len(got) != 0 {
		t.Errorf("sandbox copies after the run ended = %v, want none", got)
	}
	if out := a.replica().fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("after run end, on another replica: %s", out)
	}
}

func TestEditWorksWhenTheCopyCannotBeWritten(t *testing.T) {
	// The copies' parent does not exist, so the agent refuses the root.
	base := t.TempDir()
	a := newSandbox(t, astgrep.WithEditDir(filepath.Join(base, "missing", "edits")))
	a.write("a.go", "package p\n\nvar _ = old(1)\n")
	id := editID(t, a.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}))
	a.ok("resolve", map[string]any{"edit_id": id, "action": "accept"})
	if a.read("a.go") != "package p\n\nvar _ = new(1)\n" {
		t.Error("the memory copy did not serve the accept")
	}
}

func TestReplicaRefusesACopyOfAnotherSandbox(t *testing.T) {
	a := newSandbox(t)
	a.write("a.go", "package p\n\nvar _ = old(1)\n")
	id := editID(t, a.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}))
	// The same files under another sandbox id (a clone carrying /tmp along).
	b := a.replicaAs("sb2")
	if out := b.fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "was prepared in another sandbox") {
		t.Errorf("another sandbox's copy: %s", out)
	}
	if a.read("a.go") != "package p\n\nvar _ = old(1)\n" {
		t.Error("another sandbox's copy was written")
	}
	if got := a.copies(); len(got) != 0 {
		t.Errorf("sandbox copies after the refusal = %v, want none", got)
	}
}
