package lsp_test

import "testing"

func TestCNavigation(t *testing.T) {
	bx := newBox(t, []string{"c.txtar"})
	fx := bx.fx
	const main, header = "cproj/main.c", "cproj/shape.h"
	call := fx.Line(t, main, "square_area(sq)")
	bx.ok("lsp", nav("definition", main, call, "square_area"), fx.At(t, header, "double square_area(")+" double square_area(struct square s);")
	bx.ok("lsp", nav("type_definition", main, call, "sq"), fx.At(t, header, "struct square {")+" struct square {")
	bx.ok("lsp", nav("hover", main, fx.Line(t, main, "struct square sq = {2};"), "sq"), "struct square")
	out := bx.ok("edit", map[string]any{"path": "cproj/main.c", "old": "\treturn 0;\n", "new": "\treturn undefined_name;\n"})
	if n := countNew(t, out); n != 1 {
		t.Fatalf("want 1 new diagnostic from clangd, got %d:\n%s", n, out)
	}
}
