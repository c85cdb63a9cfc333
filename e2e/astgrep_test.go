package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestStructuralSearchAndRewrite drives ast_grep, ast_edit and resolve
// through the built daemon: search by shape, prepare a rewrite, see nothing
// written, accept it, and read the result back with the file tools.
func TestStructuralSearchAndRewrite(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := startDaemon(t, backend, t.TempDir())
			sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-ast"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ast"})
			if err != nil {
				t.Fatal(err)
			}
			names := toolNames(run.Tools)
			if !slices.Contains(names, "ast_grep") && os.Getenv("SANDBOXD_BIN") == "" {
				t.Skip("the daemon under test was built here without cgo, so the tree-sitter engine is not in it; set SANDBOXD_BIN to a `make build` binary")
			}
			for _, want := range []string{"ast_grep", "ast_edit", "resolve"} {
				if !slices.Contains(names, want) {
					t.Fatalf("run tools %v lack %q", names, want)
				}
			}
			plan, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ast", Surface: "plan"})
			if err != nil {
				t.Fatal(err)
			}
			if pn := toolNames(plan.Tools); !slices.Contains(pn, "ast_grep") || slices.Contains(pn, "ast_edit") || slices.Contains(pn, "resolve") {
				t.Errorf("plan run tools %v: want ast_grep without ast_edit and resolve", pn)
			}

			src := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tif err := run(); err != nil {\n\t\tfmt.Println(\"failed:\",\n\t\t\terr) // report\n\t}\n\t// fmt.Println(\"in a comment\")\n}\n"
			mustCall(t, d, run.ID, "write", map[string]any{"path": "app/main.go", "content": src})
			mustCall(t, d, run.ID, "write", map[string]any{"path": "gen/skip.go", "content": "package gen\n\nfunc f() { fmt.Println(\"ignored\", 1) }\n"})
			mustCall(t, d, run.ID, "write", map[string]any{"path": ".gitignore", "content": "gen/\n"})

			out := mustCall(t, d, run.ID, "ast_grep", map[string]any{"pattern": "fmt.Println($MSG, $$$REST)", "language": "go"})
			if !strings.Contains(out, "1 match in 1 file") || !strings.Contains(out, "app/main.go:7:") || !strings.Contains(out, "$MSG = \"failed:\"") {
				t.Fatalf("ast_grep = %q", out)
			}
			if _, err := call(t, d, run.ID, "ast_grep", map[string]any{"pattern": "fmt.Println($MSG, $$$REST)"}); err == nil || !strings.Contains(err.Error(), "give language") {
				t.Errorf("a directory without language: %v", err)
			}

			out = mustCall(t, d, run.ID, "ast_edit", map[string]any{"pattern": "fmt.Println($MSG, $$$REST)", "rewrite": "log.Println($MSG, $$$REST)", "path": "app", "language": "go"})
			id := ""
			for _, l := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(l, "edit_id: "); ok {
					id = v
				}
			}
			if id == "" || !strings.Contains(out, "+\t\tlog.Println(\"failed:\",") {
				t.Fatalf("ast_edit = %q", out)
			}
			if got := mustCall(t, d, run.ID, "read", map[string]any{"path": "app/main.go"}); strings.Contains(got, "log.Println") {
				t.Fatal("ast_edit wrote before resolve")
			}
			mustCall(t, d, run.ID, "resolve", map[string]any{"edit_id": id, "action": "accept"})
			got := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat app/main.go"})
			if !strings.Contains(got, "\t\tlog.Println(\"failed:\", err) // report\n") || !strings.Contains(got, "// fmt.Println(\"in a comment\")") {
				t.Errorf("after accept: %q", got)
			}
			if _, err := call(t, d, run.ID, "resolve", map[string]any{"edit_id": id, "action": "accept"}); err == nil {
				t.Error("an edit_id was accepted twice")
			}
		})
	}
}
