package lsp_test

import "testing"

func TestCNavigation(t *testing.T) {
	bx := newBox(t, []string{"c.txtar"})
	// main.c line 6: printf("%f\n", square_area(sq));
	bx.ok("lsp", nav("definition", "cproj/main.c", 6, "square_area"), "cproj/shape.h:8: double square_area(struct square s);")
	bx.ok("lsp", nav("type_definition", "cproj/main.c", 6, "sq"), "cproj/shape.h:4: struct square {")
	bx.ok("lsp", nav("hover", "cproj/main.c", 5, "sq"), "struct square")
	out := bx.ok("edit", map[string]any{"path": "cproj/main.c", "old": "\treturn 0;\n", "new": "\treturn undefined_name;\n"})
	if n := countNew(t, out); n != 1 {
		t.Fatalf("want 1 new diagnostic from clangd, got %d:\n%s", n, out)
	}
}
