package lsp_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// newLocalBox is a box over an in-process agent daemon serving a temp dir,
// with a fake language ("fake", *.fk, root marker fake.mod) served by this
// test binary in the given mode. No Docker needed.
func newLocalBox(t *testing.T, mode string, opts ...lsp.Option) *box {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "proj", "fake.mod"), nil, 0o644); err != nil {
		t.Fatal(err)
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
	fake := &lsp.Language{
		Name: "fake", Commands: [][]string{{self}}, Extensions: []string{".fk"}, RootMarkers: []string{"fake.mod"},
		DefaultID: "fake", Env: map[string]string{fakeServerEnv: mode}, Quiet: 300,
	}
	bx := &box{t: t, ws: ws, lsp: lsp.New(append([]lsp.Option{lsp.WithLanguages(fake), lsp.WithStartTimeout(10 * time.Second)}, opts...)...)}
	t.Cleanup(func() {
		bx.lsp.Close()
		client.Close()
		srv.Close() // kills and reaps the fake servers it spawned
	})
	bx.conn = &tools.SandboxConn{ID: "local", Backend: "test", Workspace: ws, Agent: client}
	bx.reg = tools.NewRegistry()
	for _, tool := range files.Tools() {
		bx.reg.Register(tool)
	}
	for _, tool := range bx.lsp.Tools() {
		bx.reg.Register(tool)
	}
	bx.env = &tools.Env{
		Run:        &tools.Run{ID: "run-local", Surface: tools.SurfaceDefault, Workdir: ws},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return bx.conn, nil },
	}
	bx.env.AfterWrite = bx.lsp.AfterWrite(bx.env)
	return bx
}

// A server that publishes type errors first and its analysis a moment
// later (gopls with its default delay): the write waits for the second
// publish and reports both, once.
func TestDiagnosticsAcrossTwoPublishes(t *testing.T) {
	bx := newLocalBox(t, "twice")
	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "ok\nBAD\nWARN\n"}, "2 new problem(s)",
		"proj/a.fk:2: error [bad]: bad thing", "proj/a.fk:3: warning [vet]: analysis finding")
	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "ok\nok\nBAD\nWARN\n"}, "no new problems")
	// A second identical warning raises its count: one is new.
	out := bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "WARN\nok\nBAD\nWARN\n"}, "1 new problem(s)", "warning [vet]: analysis finding")
	if strings.Contains(out, "bad thing") {
		t.Errorf("the unchanged error was reported again:\n%s", out)
	}
}

// A server that says nothing in time: the result is "pending", never clean.
func TestDiagnosticsPendingIsNotClean(t *testing.T) {
	bx := newLocalBox(t, "silent", lsp.WithDiagnosticsWait(300*time.Millisecond))
	out := bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "BAD\n"}, "diagnostics pending for proj/a.fk", "NOT a clean result")
	if strings.Contains(out, "no new problems") {
		t.Errorf("a silent server was reported clean:\n%s", out)
	}
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "proj/a.fk"}, "diagnostics pending")
}

// A server that publishes without versions and skips unchanged results
// (typescript-language-server): an edit that changes nothing is judged
// against its last report after the settle time, and says so.
func TestDiagnosticsUnversionedWithoutRepublish(t *testing.T) {
	bx := newLocalBox(t, "dedup")
	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "BAD\n"}, "1 new problem(s)", "proj/a.fk:1: error [bad]: bad thing")
	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "BAD\n// comment\n"}, "no new problems", "did not republish")
	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "BAD\nBAD\n"}, "1 new problem(s)", "proj/a.fk:2: error")
	bx.ok("lsp", map[string]any{"action": "status"}, "- fake: fake-dedup for root proj (ready")
	bx.bad("lsp", nav("hover", "proj/missing.fk", 1, "x"), "proj/missing.fk cannot be read")
	bx.bad("lsp", nav("hover", "proj/a.txt", 1, "x"), "no language server handles .txt files")
}
