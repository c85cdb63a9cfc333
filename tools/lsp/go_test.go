package lsp_test

import (
	"strings"
	"testing"
)

func TestGoNavigation(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	// main.go line 14: sq := shapes.NewSquare(2)
	bx.ok("lsp", nav("definition", "goproj/main.go", 14, "NewSquare"),
		"goproj/shapes/shape.go:19: func NewSquare(größe float64) Square")
	bx.ok("lsp", nav("references", "goproj/shapes/shape.go", 5, "Area"),
		"goproj/shapes/shape.go:5: Area() float64", "goproj/main.go:10:")
	bx.ok("lsp", nav("hover", "goproj/main.go", 14, "sq"), "Square")
	bx.ok("lsp", nav("implementation", "goproj/shapes/shape.go", 4, "Shape"),
		"goproj/shapes/shape.go:9: type Square struct {")
	bx.ok("lsp", nav("type_definition", "goproj/main.go", 15, "sq#2"),
		"goproj/shapes/shape.go:9: type Square struct {")
	bx.ok("lsp", map[string]any{"action": "symbols", "file": "goproj/shapes/shape.go"}, "struct Square", "function NewSquare")
	bx.ok("lsp", map[string]any{"action": "symbols", "query": "NewSquare"}, "goproj/shapes/shape.go:19: function NewSquare")
	// A symbol after non-ASCII text on its line: the position must be
	// counted in UTF-16, or the server lands on another name.
	bx.ok("lsp", nav("hover", "goproj/shapes/shape.go", 19, "größe#2"), "größe float64")
	bx.ok("lsp", nav("references", "goproj/shapes/shape.go", 19, "Side"), "goproj/main.go:15:", "goproj/shapes/shape.go:10:")

	// A change the server was not told of (here by shell) is seen before
	// answering: line 14 moved to 15, and the answer follows the disk.
	bx.ok("shell", map[string]any{"command": "sed -i '1i // a new first line' goproj/main.go"})
	bx.ok("lsp", nav("definition", "goproj/main.go", 15, "NewSquare"), "goproj/shapes/shape.go:19: func NewSquare(größe float64) Square")
	bx.bad("lsp", nav("definition", "goproj/main.go", 14, "NewSquare"), "not on line 14")
	bx.ok("shell", map[string]any{"command": "sed -i '1d' goproj/main.go"})

	// Addressing errors.
	bx.bad("lsp", nav("definition", "goproj/shapes/shape.go", 15, "Side"), `occurs 2 times on line 15`, "Side#2")
	bx.bad("lsp", nav("definition", "goproj/main.go", 14, "Circle"), `not on line 14`, `sq := shapes.NewSquare(2)`)
	bx.bad("lsp", nav("definition", "goproj/main.go", 99, "x"), "line 99 is out of range", "has 16 lines")
	bx.bad("lsp", nav("definition", "/etc/passwd.go", 1, "x"), "outside the workspace")
	bx.bad("lsp", nav("definition", "../../etc/x.go", 1, "x"), "outside the workspace")
	bx.bad("lsp", map[string]any{"action": "definition", "file": "goproj/main.go", "line": 14}, "needs symbol")
}

func TestGoCodeActionsAndRename(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	bx.ok("edit", map[string]any{"path": "goproj/main.go", "old": "\tsq := shapes.NewSquare(2)\n", "new": "\tsq := shapes.NewSquare(2)\n\tempty := shapes.Square{}\n\t_ = empty\n"})
	bx.ok("lsp", map[string]any{"action": "code_actions", "file": "goproj/main.go", "line": 15, "symbol": "Square"}, "Fill")

	out := bx.ok("lsp_rename", map[string]any{"file": "goproj/shapes/shape.go", "line": 10, "symbol": "Side", "new_name": "Length"},
		`renamed "Side" to "Length"`, "goproj/main.go:17:", "goproj/shapes/shape.go:10:")
	if strings.Contains(out, "new problem(s)") || strings.Contains(out, "pending") {
		t.Errorf("a clean rename reported new problems:\n%s", out)
	}
	text := bx.ok("read", map[string]any{"path": "goproj/main.go"})
	if !strings.Contains(text, "sq.Length") || strings.Contains(text, "sq.Side") {
		t.Errorf("main.go not renamed:\n%s", text)
	}
	bx.ok("lsp", nav("definition", "goproj/main.go", 17, "Length"), "goproj/shapes/shape.go:10: Length float64")
	bx.bad("lsp_rename", map[string]any{"file": "goproj/main.go", "line": 13, "symbol": "func", "new_name": "fn"}, "cannot be renamed")
}
