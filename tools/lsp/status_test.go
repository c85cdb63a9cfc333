package lsp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

func TestStatusSaysWhatIsMissing(t *testing.T) {
	zig := &lsp.Language{Name: "zig", Commands: [][]string{{"zls"}}, Extensions: []string{".zig"}, RootMarkers: []string{"build.zig"}, DefaultID: "zig"}
	bx := newBox(t, []string{"go.txtar"}, lsp.WithLanguages(zig))
	if err := bx.conn.Agent.WriteFiles(context.Background(), &proto.WriteFilesRequest{Root: bx.ws, Files: []proto.WriteFile{
		{Path: bx.ws + "/goproj/build.zig", Data: []byte("// zig\n")},
		{Path: bx.ws + "/goproj/main.zig", Data: []byte("const x = 1;\n")},
	}}); err != nil {
		t.Fatal(err)
	}
	// Binary present, root marker missing.
	out := bx.ok("lsp", map[string]any{"action": "status", "file": "loose/notes.go"},
		"running servers: none", "- go: cannot start: no root marker (go.mod) at or above loose")
	if strings.Contains(out, `- go: cannot start: no root marker (go.mod) at or above loose; binary`) {
		t.Errorf("status blames the go binary, which exists:\n%s", out)
	}
	bx.bad("lsp", nav("hover", "loose/notes.go", bx.fx.Line(t, "loose/notes.go", "package loose"), "loose"), "no go root marker (go.mod)")
	// Root marker present, binary missing; and both present.
	bx.ok("lsp", map[string]any{"action": "status", "file": "goproj/main.go"},
		`- zig: cannot start: binary "zls" not found on the sandbox's PATH`, "- go: can start for root goproj (/")
	bx.bad("lsp", map[string]any{"action": "hover", "file": "goproj/main.zig", "line": 1, "symbol": "x"}, `binary "zls" not found`)
	// Both missing.
	bx.ok("lsp", map[string]any{"action": "status", "file": "loose/notes.go"},
		`- rust: cannot start: no root marker (Cargo.toml) at or above loose; binary "rust-analyzer" not found`)
	// A running server is listed per root.
	bx.ok("lsp", goHover(t, bx), "Square")
	status := bx.ok("lsp", map[string]any{"action": "status"}, "- go: gopls v", "for root goproj (ready")
	// gopls's version is its build information as JSON; status shows the
	// name, version, root and state only.
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "- go: gopls") && (strings.Contains(l, "{") || len(l) > 200) {
			t.Errorf("the running gopls is described as:\n%s", l)
		}
	}
	bx.ok("lsp", map[string]any{"action": "status", "file": "loose/notes.go"},
		"- dart: cannot start: no root marker (pubspec.yaml) at or above loose; binary \"dart\" not found on the sandbox's PATH: the Dart SDK (for `dart language-server`) is not installed in the sandbox")
}

func TestCrashedServerRestarts(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"}, lsp.WithRestartBudget(2, time.Hour))
	bx.ok("lsp", goDefinition(t, bx), goDefinedAt(t, bx))
	kill := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		procs, err := bx.conn.Agent.List(ctx, &proto.ListRequest{Labels: map[string]string{"sandboxd.role": "lsp"}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range procs {
			if !p.Running {
				continue
			}
			n++
			if err := bx.conn.Agent.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := bx.conn.Agent.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second}); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	if n := kill(); n != 1 {
		t.Fatalf("want 1 running language server, found %d", n)
	}
	bx.ok("lsp", goDefinition(t, bx), goDefinedAt(t, bx))
	// The restarted server is the one that responds; killing it again uses
	// up the budget of 2 ...
	kill()
	bx.ok("lsp", goHover(t, bx), "Square")
	kill()
	bx.bad("lsp", goHover(t, bx), "crashed 2 times", `action "reload"`)
	// ... and reload starts it again on demand.
	bx.ok("lsp", map[string]any{"action": "reload", "file": "goproj/main.go"}, "restarted go: gopls")
	bx.ok("lsp", goHover(t, bx), "Square")
}

// A new sandboxd (here: a new Manager on the same sandbox) finds the
// servers the old one left running, restarts them cleanly instead of
// speaking to a protocol state it does not know, and responds.
func TestNewManagerRestartsLeftoverServers(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	bx.ok("lsp", goDefinition(t, bx), goDefinedAt(t, bx))
	running := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		procs, err := bx.conn.Agent.List(ctx, &proto.ListRequest{Labels: map[string]string{"sandboxd.role": "lsp"}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range procs {
			if p.Running {
				ids = append(ids, p.ID)
			}
		}
		return ids
	}
	before := running()
	if len(before) != 1 {
		t.Fatalf("want 1 running server, found %v", before)
	}
	bx.lsp.Close() // the old sandboxd goes away; its server keeps running
	time.Sleep(500 * time.Millisecond)
	if ids := running(); len(ids) != 1 || ids[0] != before[0] {
		t.Fatalf("closing the manager stopped the server: running %v", ids)
	}
	bx.lsp = lsp.New()
	bx.reg = tools.NewRegistry()
	for _, tool := range bx.lsp.Tools() {
		bx.reg.Register(tool)
	}
	bx.ok("lsp", goDefinition(t, bx), goDefinedAt(t, bx))
	after := running()
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("want exactly one server, a new one: before %v, after %v", before, after)
	}
}
