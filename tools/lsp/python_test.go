package lsp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/lsp"
)

func TestPythonNavigation(t *testing.T) {
	bx := newBox(t, []string{"python.txtar"})
	fx := bx.fx
	const main, base = "pyproj/main.py", "pyproj/shapes/base.py"
	sq := fx.Line(t, main, "sq = new_square(2)")
	baseArea := fx.Line(t, base, "def area(self) -> float:\n        raise")
	bx.ok("lsp", nav("definition", main, sq, "new_square"), fx.At(t, base, "def new_square(")+" def new_square(größe: float) -> Square:")
	bx.ok("lsp", nav("references", base, baseArea, "area"), fmt.Sprintf("%s:%d:", base, baseArea), fx.At(t, main, "s.area()"))
	bx.ok("lsp", nav("hover", main, sq, "sq"), "Square")
	// pyright has no textDocument/implementation (Pylance does); the result
	// must say so rather than look empty.
	bx.bad("lsp", nav("implementation", base, baseArea, "area"), "does not support implementation")
	bx.ok("lsp", nav("type_definition", main, fx.Line(t, main, "print(describe(sq), sq.side)"), "sq#2"), fx.At(t, base, "class Square(Shape):")+" class Square(Shape):")
	bx.ok("lsp", map[string]any{"action": "symbols", "file": base}, "class Square", "function new_square")
	bx.ok("lsp", map[string]any{"action": "symbols", "query": "new_square"}, fx.At(t, base, "def new_square("))
	bx.ok("lsp", nav("hover", base, fx.Line(t, base, "return Square(größe)"), "größe"), "größe")
	bx.bad("lsp", nav("definition", base, fx.Line(t, base, "return self.side * self.side"), "side"), "occurs 2 times", "side#2")

	bx.ok("edit", map[string]any{"path": main, "old": "sq = new_square(2)\n", "new": "sq = new_square(2)\nimport os\n"})
	edited := fx.With(main, strings.Replace(fx[main], "sq = new_square(2)\n", "sq = new_square(2)\nimport os\n", 1))
	bx.ok("lsp", map[string]any{"action": "code_actions", "file": main, "line": edited.Line(t, main, "import os")})

	out := bx.ok("lsp_rename", map[string]any{"file": base, "line": fx.Line(t, base, "def new_square("), "symbol": "new_square", "new_name": "make_square"},
		`renamed "new_square" to "make_square"`, edited.At(t, main, "import Shape, new_square"), fx.At(t, base, "def new_square("))
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
	const main, anchor, bad = "pyproj/main.py", "sq = new_square(2)\n", "bad: int = \"x\"\n"
	diagnosticsOnWrite(t, bx, main, anchor, bad, "not assignable")
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": main}, "1 problem(s)", "not assignable")
	at := afterDiagnosticsOnWrite(bx.fx, main, anchor, bad).Pos(t, main, `"x"`)
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "*"}, "python (pyproj): `pyright` exit status 1", fmt.Sprintf("%s:%d:%d - error", main, at.Line, at.Col))
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
	bx.ok("lsp", nav("definition", "pyproj/main.py", bx.fx.Line(t, "pyproj/main.py", "sq = new_square(2)"), "new_square"),
		bx.fx.At(t, "pyproj/shapes/base.py", "def new_square(")+" def new_square(größe: float) -> Square:")
	bx.ok("lsp", map[string]any{"action": "status"}, "- python: ", "pylsp")
}
