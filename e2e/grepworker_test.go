package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestGrepWorker runs the shipped example worker for real: it searches as
// code in the language it is told (brief line or --language) or infers
// from the files, and a pattern ast_grep refuses fails the worker with
// ast_grep's reason instead of a quiet text search.
func TestGrepWorker(t *testing.T) {
	d := vibeDaemon(t)
	c := d.Client
	sb, err := c.CreateSandbox(ctx(t), createReq("host", "conv-grepworker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(ctx(t), sb.ID) })
	run, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-grepworker", Vibe: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(run.Tools), "ast_grep") {
		if os.Getenv("SANDBOXD_BIN") == "" {
			t.Skip("the daemon under test was built here without cgo, so ast_grep is not in it; set SANDBOXD_BIN to a `make build` binary")
		}
		t.Fatalf("run tools %v lack ast_grep", toolNames(run.Tools))
	}
	script, err := filepath.Abs("../examples/workers/grep-worker.py")
	if err != nil {
		t.Fatal(err)
	}
	// Python is the workspace's main language; one Go file has the same call.
	mustCall(t, d, run.ID, "write", map[string]any{"path": "app/a.py", "content": "def main():\n    return compute(1, 2)\n"})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "app/b.py", "content": "x = compute(3)\n# compute(4) in a comment\n"})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "cmd/main.go", "content": "package main\n\nfunc main() { compute(5, 6) }\n"})

	worker := 0
	spawn := func(brief, tier string) (string, error) {
		t.Helper()
		worker++
		mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": brief, "label": "search", "tier": tier})
		return call(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": fmt.Sprintf("w%d", worker), "timeout_seconds": 120})
	}

	t.Run("language inferred", func(t *testing.T) {
		out, err := spawn("compute($$$A)", "fast")
		if err != nil || !strings.Contains(out, "in python") || !strings.Contains(out, "a.py") || !strings.Contains(out, "b.py") || strings.Contains(out, "main.go") || strings.Contains(out, "compute(4)") {
			t.Fatalf("vibe_wait = %q, %v; want the two Python calls (not the comment, not the Go file)", out, err)
		}
	})
	t.Run("language from the brief", func(t *testing.T) {
		out, err := spawn("compute($X, $Y)\nlanguage: go", "fast")
		if err != nil || !strings.Contains(out, "in go") || !strings.Contains(out, "main.go") || strings.Contains(out, ".py") {
			t.Fatalf("vibe_wait = %q, %v; want the Go call only", out, err)
		}
	})
	t.Run("language flag", func(t *testing.T) {
		// Tier good runs its brief as a script, with the worker's environment.
		out, err := spawn(fmt.Sprintf("printf 'compute($X, $Y)\\n' | python3 %q --language go", script), "good")
		if err != nil || !strings.Contains(out, "in go") || !strings.Contains(out, "main.go") {
			t.Fatalf("vibe_wait = %q, %v; want the Go call", out, err)
		}
	})
	t.Run("refused pattern fails loudly", func(t *testing.T) {
		out, err := spawn("def (", "fast")
		if err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "ast_grep refused 'def (' as python") {
			t.Fatalf("vibe_wait = %q, %v; want the worker failed with ast_grep's reason", out, err)
		}
	})
	t.Run("unknown language fails loudly", func(t *testing.T) {
		_, err := spawn("compute($X)\nlanguage: cobol", "fast")
		if err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "as cobol") {
			t.Fatalf("vibe_wait: %v; want the worker failed naming the language", err)
		}
	})
	t.Run("text search", func(t *testing.T) {
		out, err := spawn("compute(4)\ntext: yes", "fast")
		if err != nil || !strings.Contains(out, "grep matches") || !strings.Contains(out, "b.py:2") {
			t.Fatalf("vibe_wait = %q, %v; want the comment found as text", out, err)
		}
	})
}
