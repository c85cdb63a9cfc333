package lsp_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestTypeScriptNavigation(t *testing.T) {
	bx := newBox(t, []string{"typescript.txtar"})
	fx := bx.fx
	const main, shape = "tsproj/src/main.ts", "tsproj/src/shape.ts"
	sq := fx.Line(t, main, "const sq = newSquare(2);")
	newSquare := fx.At(t, shape, "export function newSquare(")
	bx.ok("lsp", nav("definition", main, sq, "newSquare"), newSquare+" export function newSquare(größe: number): Square {")
	bx.ok("lsp", nav("references", shape, fx.Line(t, shape, "area(): number;"), "area"), fx.At(t, shape, "area(): number;"), fx.At(t, main, "s.area()"))
	bx.ok("lsp", nav("hover", main, sq, "sq"), "Square")
	bx.ok("lsp", nav("implementation", shape, fx.Line(t, shape, "export interface Shape"), "Shape"),
		fx.At(t, shape, "export class Square")+" export class Square implements Shape {")
	bx.ok("lsp", nav("type_definition", main, fx.Line(t, main, "console.log(describe(sq), sq.side);"), "sq#2"), fx.At(t, shape, "export class Square"))
	bx.ok("lsp", map[string]any{"action": "symbols", "file": shape}, "class Square", "function newSquare")
	bx.ok("lsp", map[string]any{"action": "symbols", "query": "newSquare"}, newSquare)
	bx.ok("lsp", nav("hover", shape, fx.Line(t, shape, "return new Square(größe);"), "größe"), "größe")

	bx.ok("lsp", map[string]any{"action": "code_actions", "file": main, "line": fx.Line(t, main, "function describe("), "symbol": "describe"})

	out := bx.ok("lsp_rename", map[string]any{"file": shape, "line": fx.Line(t, shape, "export function newSquare("), "symbol": "newSquare", "new_name": "makeSquare"},
		`renamed "newSquare" to "makeSquare"`, fx.At(t, main, "import { Shape, newSquare }"), newSquare)
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
	const main, anchor, bad = "tsproj/src/main.ts", "const sq = newSquare(2);\n", "export const bad: number = \"x\";\n"
	diagnosticsOnWrite(t, bx, main, anchor, bad, "not assignable")
	line := afterDiagnosticsOnWrite(bx.fx, main, anchor, bad).Line(t, main, bad)
	bx.ok("lsp", map[string]any{"action": "diagnostics", "file": "*"}, "typescript (tsproj): `tsc --noEmit -p .` exit status", fmt.Sprintf("src/main.ts(%d,", line))
}
