package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// TestLSPOverHTTP drives gopls in a Docker sandbox through the built daemon:
// navigation by line and symbol, diagnostics appended to a write, a rename,
// and a daemon restart after which the server is started afresh.
func TestLSPOverHTTP(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run language servers in the sandbox image on Docker")
	}
	d := startDaemon(t, "docker", t.TempDir())

	// Without a sandbox the tools are listed (they stand on supervision and
	// a workdir) and a call says what is missing.
	run0, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-lsp-none"})
	if err != nil {
		t.Fatal(err)
	}
	if names := toolNames(run0.Tools); !slices.Contains(names, "lsp") || !slices.Contains(names, "lsp_rename") {
		t.Fatalf("lsp tools not listed: %v", names)
	}
	if _, err := call(t, d, run0.ID, "lsp", map[string]any{"action": "status"}); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Fatalf("lsp without a sandbox: %v", err)
	}

	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-lsp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-lsp"})
	if err != nil {
		t.Fatal(err)
	}
	fx := toolstest.Fixture{
		"calc/go.mod": "module example.com/calc\n\ngo 1.26\n",
		"calc/add.go": "package calc\n\n// Add sums two ints.\nfunc Add(a, b int) int { return a + b }\n",
		"calc/use.go": "package calc\n\nfunc Twice(x int) int { return Add(x, x) }\n",
	}
	for _, name := range []string{"calc/go.mod", "calc/add.go", "calc/use.go"} {
		mustCall(t, d, run.ID, "write", map[string]any{"path": name, "content": fx[name]})
	}
	// Positions are found in the files' text, not counted by hand.
	add, twice := fx.Line(t, "calc/add.go", "func Add("), fx.At(t, "calc/use.go", "func Twice(")

	out := mustCall(t, d, run.ID, "lsp", map[string]any{"action": "definition", "file": "calc/use.go", "line": fx.Line(t, "calc/use.go", "return Add(x, x)"), "symbol": "Add"})
	if !strings.Contains(out, fx.At(t, "calc/add.go", "func Add(")+" func Add(a, b int) int { return a + b }") {
		t.Fatalf("definition = %q", out)
	}
	out = mustCall(t, d, run.ID, "edit", map[string]any{"path": "calc/use.go", "old": "return Add(x, x)", "new": "return Add(x, \"x\")"})
	if !strings.Contains(out, "1 new problem(s)") || !strings.Contains(out, twice+" error") {
		t.Fatalf("edit introducing an error did not report it: %q", out)
	}
	out = mustCall(t, d, run.ID, "edit", map[string]any{"path": "calc/use.go", "old": "return Add(x, \"x\")", "new": "return Add(x, x)"})
	if !strings.Contains(out, "no new problems") {
		t.Fatalf("fixing edit: %q", out)
	}
	out = mustCall(t, d, run.ID, "lsp_rename", map[string]any{"file": "calc/add.go", "line": add, "symbol": "Add", "new_name": "Sum"})
	if !strings.Contains(out, `renamed "Add" to "Sum"`) || !strings.Contains(out, twice) {
		t.Fatalf("rename = %q", out)
	}
	if out := mustCall(t, d, run.ID, "read", map[string]any{"path": "calc/use.go"}); !strings.Contains(out, "return Sum(x, x)") {
		t.Fatalf("use.go after rename: %q", out)
	}

	d.restart()
	run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-lsp"})
	if err != nil {
		t.Fatal(err)
	}
	out = mustCall(t, d, run2.ID, "lsp", map[string]any{"action": "references", "file": "calc/add.go", "line": add, "symbol": "Sum"})
	if !strings.Contains(out, twice+" func Twice(x int) int { return Sum(x, x) }") {
		t.Fatalf("references after a daemon restart = %q", out)
	}
	out = mustCall(t, d, run2.ID, "lsp", map[string]any{"action": "status"})
	if strings.Count(out, "- go: gopls") != 1 {
		t.Fatalf("want exactly one gopls after the restart:\n%s", out)
	}
}
