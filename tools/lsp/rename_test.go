package lsp

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// localSession is a session over a real agent daemon serving a temp dir.
func localSession(t *testing.T, files map[string]string) (*session, string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	for name, data := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := daemon.New()
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := agent.NewClient(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); srv.Close() })
	conn := &tools.SandboxConn{ID: "sb", Workspace: ws, Agent: client}
	env := &tools.Env{Run: &tools.Run{ID: "r", Workdir: ws}, HasSandbox: true}
	m := New()
	return &session{m: m, env: env, conn: conn, sup: m.supervisor(conn), wd: ws, rel: relTo(ws, ws)}, ws
}

// span is the range of sub where it lies in match, the one occurrence of
// match in src (ASCII: UTF-16 units are bytes), found by text as
// toolstest.PosOf finds it.
func span(t *testing.T, src, match, sub string) Range {
	t.Helper()
	i := strings.Index(match, sub)
	if i < 0 {
		t.Fatalf("%q does not hold %q", match, sub)
	}
	p := toolstest.PosOf(t, src, match, i)
	start := Position{Line: uint32(p.Line - 1), Character: uint32(p.Col - 1)}
	return Range{Start: start, End: Position{Line: start.Line, Character: start.Character + uint32(len(sub))}}
}

func TestPlanEditWithFileOperations(t *testing.T) {
	const a, old = "from old import f\nf()\n", "def f():\n    pass\n"
	s, ws := localSession(t, map[string]string{"a.py": a, "old.py": old, "gone.py": "x = 1\n"})
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	we := &WorkspaceEdit{DocumentChanges: []json.RawMessage{
		raw(documentChange{TextDocument: &versionedTextDocumentIdentifier{URI: fileURI(ws + "/a.py")}, Edits: []TextEdit{{Range: span(t, a, "from old", "old"), NewText: "new"}}}),
		raw(documentChange{Kind: "rename", OldURI: fileURI(ws + "/old.py"), NewURI: fileURI(ws + "/pkg/new.py")}),
		raw(documentChange{TextDocument: &versionedTextDocumentIdentifier{URI: fileURI(ws + "/pkg/new.py")}, Edits: []TextEdit{{Range: span(t, old, "pass", "pass"), NewText: "return 1"}}}),
		raw(documentChange{Kind: "create", URI: fileURI(ws + "/pkg/__init__.py")}),
		raw(documentChange{Kind: "delete", URI: fileURI(ws + "/gone.py")}),
	}}
	ctx := context.Background()
	plan, err := s.planEdit(ctx, we, encUTF16)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.set.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.py": "from new import f\nf()\n", "pkg/new.py": "def f():\n    return 1\n", "pkg/__init__.py": ""}
	edited := want
	for name, text := range want {
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || string(got) != text {
			t.Errorf("%s = %q, %v; want %q", name, got, err, text)
		}
	}
	for _, name := range []string{"old.py", "gone.py"} {
		if _, err := os.Stat(filepath.Join(ws, name)); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", name, err)
		}
	}
	if got := strings.Join(plan.ops, "; "); got != "moved old.py to pkg/new.py; created pkg/__init__.py; deleted gone.py" {
		t.Errorf("ops = %q", got)
	}

	// A file changed between planning and writing: nothing is written.
	plan, err = s.planEdit(ctx, &WorkspaceEdit{Changes: map[string][]TextEdit{
		fileURI(ws + "/a.py"):       {{Range: span(t, edited["a.py"], "\nf()", "f"), NewText: "g"}},
		fileURI(ws + "/pkg/new.py"): {{Range: span(t, edited["pkg/new.py"], "def f", "f"), NewText: "g"}},
	}}, encUTF16)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "pkg/new.py"), []byte("changed meanwhile\n"), 0o644)
	if err := plan.set.Commit(ctx); err == nil {
		t.Fatal("a write over a file changed since the plan succeeded")
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.py")); string(got) != want["a.py"] {
		t.Errorf("a.py changed although the edit failed: %q", got)
	}

	// Edits outside the workspace or on missing files refuse the whole edit.
	if _, err := s.planEdit(ctx, &WorkspaceEdit{Changes: map[string][]TextEdit{"file:///etc/passwd": {{NewText: "x"}}}}, encUTF16); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("edit outside the workspace: %v", err)
	}
	if _, err := s.planEdit(ctx, &WorkspaceEdit{Changes: map[string][]TextEdit{fileURI(ws + "/nope.py"): {{NewText: "x"}}}}, encUTF16); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("edit of a missing file: %v", err)
	}
}
