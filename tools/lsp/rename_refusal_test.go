package lsp_test

import (
	"strings"
	"testing"
)

// typescript-language-server refuses a keyword or a standard-library name
// with tsserver's sentence inside vscode-jsonrpc's; the tool says it in its
// own words, as for Python.
func TestTypeScriptRenameRefusalInToolWords(t *testing.T) {
	bx := newBox(t, []string{"typescript.txtar"})
	// The project loads on the first request; wait for it with a hover.
	bx.ok("lsp", nav("hover", "tsproj/src/main.ts", 7, "sq"), "Square")
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"file": "tsproj/src/main.ts", "line": 4, "symbol": "return", "new_name": "yield"},
			`"return" on line 4 of tsproj/src/main.ts cannot be renamed: the typescript server says there is no renamable symbol there (a keyword, literal or comment?)`},
		// tsserver answers a keyword with the identifier after it; the
		// rename would change `sq`.
		{map[string]any{"file": "tsproj/src/main.ts", "line": 7, "symbol": "const", "new_name": "let"},
			`"const" on line 7 of tsproj/src/main.ts cannot be renamed: the typescript server says there is no renamable symbol there (a keyword, literal or comment?)`},
		{map[string]any{"file": "tsproj/src/main.ts", "line": 8, "symbol": "log", "new_name": "print"},
			`"log" on line 8 of tsproj/src/main.ts cannot be renamed: it is declared in TypeScript's standard library (lib.*.d.ts), not in this project`},
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
