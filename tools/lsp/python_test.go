package lsp_test

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/lsp"
)

func TestPythonNavigation(t *testing.T) {
	bx := newBox(t, []string{"python.txtar"})
	// main.py line 8: sq = new_square(2)
	bx.ok("lsp", nav("definition", "pyproj/main.py", 8, "new_square"), "pyproj/shapes/base.py:16: def new_square(größe: float) -> Square:")
	bx.ok("lsp", nav("references", "pyproj/shapes/base.py", 4, "area"), "pyproj/shapes/base.py:4:", "pyproj/main.py:5:")
	bx.ok("lsp", nav("hover", "pyproj/main.py", 8, "sq"), "Square")
	// pyright has no textDocument/implementation (Pylance does); the answer
	// must say so rather than look empty.
	bx.bad("lsp", nav("implementation", "pyproj/shapes/base.py", 4, "area"), "does not support implementation")
	bx.ok("lsp", nav("type_definition", "pyproj/main.py", 9, "sq#2"), "pyproj/shapes/base.py:8: class Square(Shape):")
	bx.ok("lsp", map[string]any{"action": "symbols", "file": "pyproj/shapes/base.py"}, "class Square", "function new_square")
	bx.ok("lsp", map[string]any{"action": "symbols", "query": "new_square"}, "pyproj/shapes/base.py:16:")
	bx.ok("lsp", nav("hover", "pyproj/shapes/base.py", 17, "größe"), "größe")
	bx.bad("lsp", nav("definition", "pyproj/shapes/base.py", 13, "side"), "occurs 2 times", "side#2")

	bx.ok("edit", map[string]any{"path": "pyproj/main.py", "old": "sq = new_square(2)\n", "new": "sq = new_square(2)\nimport os\n"})
	bx.ok("lsp", map[string]any{"action": "code_actions", "file": "pyproj/main.py", "line": 9})

	out := bx.ok("lsp_rename", map[string]any{"file": "pyproj/shapes/base.py", "line": 16, "symbol": "new_square", "new_name": "make_square"},
		`renamed "new_square" to "make_square"`, "pyproj/main.py:1:", "pyproj/shapes/base.py:16:")
	if strings.Contains(out, "new problem(s)") || strings.Contains(out, "pending") {
		t.Errorf("a clean rename reported new problems:\n%s", out)
	}
	text := bx.ok("read", map[string]any{"path": "pyproj/main.py"})
	if !strings.Contains(text, "make_square(2)") || strings.Contains(text, "new_square") {
		t.Errorf("main.py not renamed:\n%s", text)
	}
}

func TestPythonDiagnosticsOnWrite(t *testing.T) {
	bx := newBox(t, []string{"python.txtar"})
	diagnosticsOnWrite(t, bx, "pyproj/main.py", "sq = new_square(2)\n", "bad: int = \"x\"\n", "not assignable")
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "pyproj/main.py"}, "1 problem(s)", "not assignable")
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "*"}, "python (pyproj): `pyright` exit status 1", "pyproj/main.py:10:12 - error")
}

// Without pyright the Python server falls back to pylsp, and status names
// the one that runs.
func TestPythonFallsBackToPylsp(t *testing.T) {
	py := lsp.DefaultLanguages()[1]
	if py.Name != "python" {
		t.Fatalf("DefaultLanguages()[1] is %s, want python", py.Name)
	}
	noPyright := *py
	noPyright.Commands = [][]string{{"pyright-langserver-absent", "--stdio"}, {"pylsp"}}
	bx := newBox(t, []string{"python.txtar"}, lsp.WithLanguages(&noPyright))
	bx.ok("lsp", nav("definition", "pyproj/main.py", 8, "new_square"), "pyproj/shapes/base.py:16: def new_square(größe: float) -> Square:")
	bx.ok("lsp", map[string]any{"action": "status"}, "- python: ", "pylsp")
}
