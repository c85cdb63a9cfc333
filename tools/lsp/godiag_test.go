package lsp_test

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// countNew returns how many diagnostics a write reported as new.
func countNew(t *testing.T, out string) int {
	t.Helper()
	if strings.Contains(out, "diagnostics pending") {
		t.Fatalf("diagnostics pending where the server should have answered:\n%s", out)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, ": error") || strings.Contains(l, ": warning") {
			n++
		}
	}
	return n
}

// diagnosticsOnWrite is the ledger story every language must tell: an
// error is reported once; moving it is not new; a second identical one is;
// fixing it reports nothing.
func diagnosticsOnWrite(t *testing.T, bx *box, file, anchor, bad, wantMsg string) {
	t.Helper()
	out := bx.ok("edit", map[string]any{"path": file, "old": anchor, "new": anchor + bad})
	if n := countNew(t, out); n != 1 || !strings.Contains(out, wantMsg) {
		t.Fatalf("introducing an error: want exactly 1 new diagnostic mentioning %q, got %d:\n%s", wantMsg, n, out)
	}
	out = bx.ok("edit", map[string]any{"path": file, "old": anchor, "new": "\n" + anchor})
	if n := countNew(t, out); n != 0 {
		t.Fatalf("moving the error down a line reported it again:\n%s", out)
	}
	out = bx.ok("edit", map[string]any{"path": file, "old": anchor, "new": anchor + strings.ReplaceAll(bad, "bad", "bad2")})
	if n := countNew(t, out); n != 1 || !strings.Contains(out, wantMsg) {
		t.Fatalf("a second identical error: want 1 new diagnostic, got %d:\n%s", n, out)
	}
	out = bx.ok("edit", map[string]any{"path": file, "old": strings.ReplaceAll(bad, "bad", "bad2"), "new": ""})
	if n := countNew(t, out); n != 0 || !strings.Contains(out, "no new problems") {
		t.Fatalf("fixing an error reported something new:\n%s", out)
	}
}

// afterDiagnosticsOnWrite is fx as diagnosticsOnWrite leaves file: the
// anchor a line down, with bad after it.
func afterDiagnosticsOnWrite(fx toolstest.Fixture, file, anchor, bad string) toolstest.Fixture {
	return fx.With(file, strings.Replace(fx[file], anchor, "\n"+anchor+bad, 1))
}

func TestGoDiagnosticsOnWrite(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	diagnosticsOnWrite(t, bx, "goproj/main.go", "func main() {\n", "\tvar bad int = \"x\"\n\t_ = bad\n", "cannot use")
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "goproj/main.go"}, "1 problem(s)", "cannot use")
	bx.ok("edit", map[string]any{"path": "goproj/main.go", "old": "\tvar bad int = \"x\"\n\t_ = bad\n", "new": ""}, "no new problems")
	// gopls publishes type errors first and its analyzers' findings (here
	// printf) a moment later; the write must wait for the second.
	out := bx.ok("edit", map[string]any{"path": "goproj/main.go", "old": "func main() {\n", "new": "func main() {\n\tfmt.Printf(\"%d\\n\", \"s\")\n"})
	if n := countNew(t, out); n != 1 || !strings.Contains(out, "printf") {
		t.Fatalf("an analyzer finding: want 1 new diagnostic from printf, got %d:\n%s", n, out)
	}
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "goproj/main.go"}, "1 problem(s)", "Printf format %d")
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "*"}, "go vet ./...", "exit status")
}
