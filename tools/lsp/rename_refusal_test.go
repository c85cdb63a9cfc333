package lsp_test

import (
	"fmt"
	"strings"
	"testing"
)

// typescript-language-server refuses a keyword or a standard-library name
// with tsserver's error message inside vscode-jsonrpc's; the tool says it
// in its own words, as for Python.
func TestTypeScriptRenameRefusalInToolWords(t *testing.T) {
	bx := newBox(t, []string{"typescript.txtar"})
	const main = "tsproj/src/main.ts"
	ret := bx.fx.Line(t, main, "return `area")
	sq := bx.fx.Line(t, main, "const sq = newSquare(2);")
	log := bx.fx.Line(t, main, "console.log(")
	// The project loads on the first request; wait for it with a hover.
	bx.ok("lsp", nav("hover", main, sq, "sq"), "Square")
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"file": main, "line": ret, "symbol": "return", "new_name": "yield"},
			fmt.Sprintf(`"return" on line %d of %s cannot be renamed: the typescript server says there is no renamable symbol there (a keyword, literal or comment?)`, ret, main)},
		// tsserver responds to a keyword with the identifier after it; the
		// rename would change `sq`.
		{map[string]any{"file": main, "line": sq, "symbol": "const", "new_name": "let"},
			fmt.Sprintf(`"const" on line %d of %s cannot be renamed: the typescript server says there is no renamable symbol there (a keyword, literal or comment?)`, sq, main)},
		{map[string]any{"file": main, "line": log, "symbol": "log", "new_name": "print"},
			fmt.Sprintf(`"log" on line %d of %s cannot be renamed: it is declared in TypeScript's standard library (lib.*.d.ts), not in this project`, log, main)},
	} {
		out := bx.bad("lsp_rename", c.args, c.want)
		if strings.Contains(out, "Request textDocument") || strings.Contains(out, "You cannot rename") {
			t.Errorf("the server's raw text shows:\n%s", out)
		}
	}
	if text := bx.ok("read", map[string]any{"path": "tsproj/src/main.ts"}); !strings.Contains(text, "const sq = newSquare(2);") {
		t.Errorf("a refused rename changed main.ts:\n%s", text)
	}
}
