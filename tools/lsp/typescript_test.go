package lsp_test

import (
	"strings"
	"testing"
)

func TestTypeScriptNavigation(t *testing.T) {
	bx := newBox(t, []string{"typescript.txtar"})
	// main.ts line 7: const sq = newSquare(2);
	bx.ok("lsp", nav("definition", "tsproj/src/main.ts", 7, "newSquare"), "tsproj/src/shape.ts:13: export function newSquare(größe: number): Square {")
	bx.ok("lsp", nav("references", "tsproj/src/shape.ts", 2, "area"), "tsproj/src/shape.ts:2:", "tsproj/src/main.ts:4:")
	bx.ok("lsp", nav("hover", "tsproj/src/main.ts", 7, "sq"), "Square")
	bx.ok("lsp", nav("implementation", "tsproj/src/shape.ts", 1, "Shape"), "tsproj/src/shape.ts:5: export class Square implements Shape {")
	bx.ok("lsp", nav("type_definition", "tsproj/src/main.ts", 8, "sq#2"), "tsproj/src/shape.ts:5:")
	bx.ok("lsp", map[string]any{"action": "symbols", "file": "tsproj/src/shape.ts"}, "class Square", "function newSquare")
	bx.ok("lsp", map[string]any{"action": "symbols", "query": "newSquare"}, "tsproj/src/shape.ts:13:")
	bx.ok("lsp", nav("hover", "tsproj/src/shape.ts", 14, "größe"), "größe")

	bx.ok("lsp", map[string]any{"action": "code_actions", "file": "tsproj/src/main.ts", "line": 3, "symbol": "describe"})

	out := bx.ok("lsp_rename", map[string]any{"file": "tsproj/src/shape.ts", "line": 13, "symbol": "newSquare", "new_name": "makeSquare"},
		`renamed "newSquare" to "makeSquare"`, "tsproj/src/main.ts:1:", "tsproj/src/shape.ts:13:")
	if strings.Contains(out, "new problem(s)") || strings.Contains(out, "pending") {
		t.Errorf("a clean rename reported new problems:\n%s", out)
	}
	text := bx.ok("read", map[string]any{"path": "tsproj/src/main.ts"})
	if !strings.Contains(text, "makeSquare(2)") || strings.Contains(text, "newSquare") {
		t.Errorf("main.ts not renamed:\n%s", text)
	}
}

func TestTypeScriptDiagnosticsOnWrite(t *testing.T) {
	bx := newBox(t, []string{"typescript.txtar"})
	diagnosticsOnWrite(t, bx, "tsproj/src/main.ts", "const sq = newSquare(2);\n", "export const bad: number = \"x\";\n", "not assignable")
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "*"}, "typescript (tsproj): `tsc --noEmit -p .` exit status", "src/main.ts(9,")
}
