package lsp_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestGoNavigation(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	fx := bx.fx
	const main, shape = "goproj/main.go", "goproj/shapes/shape.go"
	sq := fx.Line(t, main, "sq := shapes.NewSquare(2)")
	use := fx.Line(t, main, "fmt.Println(describe(sq), sq.Side)")
	newSquare := fx.Line(t, shape, "func NewSquare(")
	bx.ok("lsp", nav("definition", main, sq, "NewSquare"),
		fx.At(t, shape, "func NewSquare(")+" func NewSquare(größe float64) Square")
	bx.ok("lsp", nav("references", shape, fx.Line(t, shape, "\tArea() float64"), "Area"),
		fx.At(t, shape, "\tArea() float64")+" Area() float64", fx.At(t, main, "s.Area()"))
	bx.ok("lsp", nav("hover", main, sq, "sq"), "Square")
	bx.ok("lsp", nav("implementation", shape, fx.Line(t, shape, "type Shape interface"), "Shape"),
		fx.At(t, shape, "type Square struct")+" type Square struct {")
	bx.ok("lsp", nav("type_definition", main, use, "sq#2"),
		fx.At(t, shape, "type Square struct")+" type Square struct {")
	bx.ok("lsp", map[string]any{"action": "symbols", "file": shape}, "struct Square", "function NewSquare")
	bx.ok("lsp", map[string]any{"action": "symbols", "query": "NewSquare"}, fx.At(t, shape, "func NewSquare(")+" function NewSquare")
	// A symbol after non-ASCII text on its line: the position must be
	// counted in UTF-16, or the server lands on another name.
	bx.ok("lsp", nav("hover", shape, newSquare, "größe#2"), "größe float64")
	bx.ok("lsp", nav("references", shape, newSquare, "Side"), fx.At(t, main, "sq.Side)"), fx.At(t, shape, "\tSide float64"))

	// A change the server was not told of (here by shell) is seen before
	// responding: the line moved down by one, and the result follows the disk.
	bx.ok("shell", map[string]any{"command": "sed -i '1i // a new first line' " + main})
	moved := fx.With(main, "// a new first line\n"+fx[main])
	bx.ok("lsp", nav("definition", main, moved.Line(t, main, "sq := shapes.NewSquare(2)"), "NewSquare"),
		fx.At(t, shape, "func NewSquare(")+" func NewSquare(größe float64) Square")
	bx.bad("lsp", nav("definition", main, sq, "NewSquare"), fmt.Sprintf("not on line %d", sq))
	bx.ok("shell", map[string]any{"command": "sed -i '1d' " + main})

	// Addressing errors.
	twice := fx.Line(t, shape, "return s.Side * s.Side")
	bx.bad("lsp", nav("definition", shape, twice, "Side"), fmt.Sprintf("occurs 2 times on line %d", twice), "Side#2")
	bx.bad("lsp", nav("definition", main, sq, "Circle"), fmt.Sprintf("not on line %d", sq), `sq := shapes.NewSquare(2)`)
	lines := strings.Count(fx[main], "\n")
	bx.bad("lsp", nav("definition", main, 99, "x"), "line 99 is out of range", fmt.Sprintf("has %d lines", lines)) // far past the end
	bx.bad("lsp", nav("definition", "/etc/passwd.go", 1, "x"), "outside the workspace")
	bx.bad("lsp", nav("definition", "../../etc/x.go", 1, "x"), "outside the workspace")
	bx.bad("lsp", map[string]any{"action": "definition", "file": main, "line": sq}, "needs symbol")
}

func TestGoCodeActionsAndRename(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	const main, shape = "goproj/main.go", "goproj/shapes/shape.go"
	old, added := "\tsq := shapes.NewSquare(2)\n", "\tsq := shapes.NewSquare(2)\n\tempty := shapes.Square{}\n\t_ = empty\n"
	bx.ok("edit", map[string]any{"path": main, "old": old, "new": added})
	fx := bx.fx.With(main, strings.Replace(bx.fx[main], old, added, 1))
	bx.ok("lsp", map[string]any{"action": "code_actions", "file": main, "line": fx.Line(t, main, "empty := shapes.Square{}"), "symbol": "Square"}, "Fill")

	out := bx.ok("lsp_rename", map[string]any{"file": shape, "line": fx.Line(t, shape, "\tSide float64"), "symbol": "Side", "new_name": "Length"},
		`renamed "Side" to "Length"`, fx.At(t, main, "sq.Side)"), fx.At(t, shape, "\tSide float64"))
	if strings.Contains(out, "new problem(s)") || strings.Contains(out, "pending") {
		t.Errorf("a clean rename reported new problems:\n%s", out)
	}
	text := bx.ok("read", map[string]any{"path": main})
	if !strings.Contains(text, "sq.Length") || strings.Contains(text, "sq.Side") {
		t.Errorf("main.go not renamed:\n%s", text)
	}
	renamed := fx.With(main, strings.Replace(fx[main], "sq.Side", "sq.Length", 1)).With(shape, strings.Replace(fx[shape], "\tSide float64", "\tLength float64", 1))
	bx.ok("lsp", nav("definition", main, renamed.Line(t, main, "sq.Length)"), "Length"), renamed.At(t, shape, "\tLength float64")+" Length float64")
	bx.bad("lsp_rename", map[string]any{"file": main, "line": fx.Line(t, main, "func main() {"), "symbol": "func", "new_name": "fn"}, "cannot be renamed")
}
