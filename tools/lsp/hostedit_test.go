package lsp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The workspace is a host directory bound into the sandbox (workspace
// host_path) and the host edits a dependency directly, as an editor or a
// git checkout on the host would: nothing passes through the tools or the
// agent. Right after the host fixed the dependency, the consumer's
// diagnostics must be fresh (no error) or say they are pending, never
// the error of before the fix as if it were current; and right after the
// host broke it, never the "no problems" of before.
func TestGoHostEditOfABoundWorkspace(t *testing.T) {
	host := t.TempDir()
	bx := newBoxOn(t, []string{"go.txtar"}, host)
	dep := filepath.Join(host, "goproj/shapes/shape.go")
	orig, err := os.ReadFile(dep)
	if err != nil {
		t.Fatalf("the fixture is not on the host side of the workspace: %v", err)
	}
	diag := map[string]any{"action": "diagnostics", "file": "goproj/main.go"}
	for i := 0; !strings.Contains(bx.ok("lsp", diag), "no problems"); i++ {
		if i == 5 {
			t.Fatal("the consumer never answered clean before the host's edits")
		}
	}
	waitWatch(t, bx)
	const wantErr = "undefined: shapes.NewSquare"
	broken := strings.Replace(string(orig), "func NewSquare(", "func MakeSquare(", 1)
	for round := 0; round < 2; round++ {
		write(t, dep, broken)
		var out string
		for i := 0; i < 6; i++ {
			out = bx.ok("lsp", diag)
			if strings.Contains(out, "no problems") {
				t.Fatalf("round %d: right after the host broke %s, diagnostics of main.go answered from the report before it:\n%s", round, dep, out)
			}
			if strings.Contains(out, wantErr) {
				break
			}
			if !strings.Contains(out, "pending") {
				t.Fatalf("round %d: after the host broke the dependency, main.go's diagnostics are neither the new error (%q) nor pending:\n%s", round, wantErr, out)
			}
		}
		if !strings.Contains(out, wantErr) {
			t.Fatalf("round %d: the error the host's edit made (%q) never showed:\n%s", round, wantErr, out)
		}
		write(t, dep, string(orig))
		for i := 0; i < 6; i++ {
			out = bx.ok("lsp", diag)
			if strings.Contains(out, wantErr) {
				t.Fatalf("round %d: right after the host fixed the dependency, diagnostics of main.go still showed the error from before the fix as current:\n%s", round, out)
			}
			if strings.Contains(out, "no problems") {
				break
			}
			if !strings.Contains(out, "pending") {
				t.Fatalf("round %d: after the host fixed the dependency, main.go's diagnostics are neither clean nor pending:\n%s", round, out)
			}
		}
		if !strings.Contains(out, "no problems") {
			t.Fatalf("round %d: after the host's fix, main.go never came back clean:\n%s", round, out)
		}
	}
}
