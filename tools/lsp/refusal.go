package lsp

import (
	"encoding/json"
	"regexp"
	"strings"
)

// rpcWrapper is how servers built on vscode-jsonrpc (typescript-language-
// server among them) report an exception thrown by a handler.
var rpcWrapper = regexp.MustCompile(`^Request [A-Za-z/]+ failed with message: `)

// tsRefusals are tsserver's reasons for refusing a rename, in the tool's
// words; "" means there is no renamable symbol at the position.
var tsRefusals = map[string]string{
	"You cannot rename this element.":                                                 "",
	"You cannot rename elements that are defined in the standard TypeScript library.": "it is declared in TypeScript's standard library (lib.*.d.ts), not in this project; rename only the project's own symbols",
	"You cannot rename elements that are defined in a 'node_modules' folder.":         "it is declared in a package under node_modules, not in this project; rename only the project's own symbols",
	"You cannot rename elements that are defined in another 'node_modules' folder.":   "it is declared in a package under node_modules, not in this project; rename only the project's own symbols",
	"You cannot rename a module via a global import.":                                 "it is a module named by a global import; rename the module's file instead",
}

// renameRefusal is why a rename was refused, from the message serverError
// made of the server's reply: the server's own wording is kept only where
// the tool has none, and the JSON-RPC framing never shows.
func renameRefusal(lang *Language, msg string) string {
	msg = strings.TrimPrefix(msg, "the "+lang.Name+" language server could not answer rename: ")
	msg = strings.TrimSpace(rpcWrapper.ReplaceAllString(msg, ""))
	if why, ok := tsRefusals[msg]; ok {
		if why == "" {
			return noRenamable(lang)
		}
		return why
	}
	return "the " + lang.Name + " server refused: " + msg
}

// noRenamable is the refusal when the server finds no symbol to rename.
func noRenamable(lang *Language) string {
	return "the " + lang.Name + " server says there is no renamable symbol there (a keyword, literal or comment?)"
}

// preparedElsewhere reports a prepareRename response whose range does not
// hold the position asked about: tsserver, asked at a keyword (`const sq`),
// responds with the next identifier, and renaming would change that name.
// It returns the text of the range the server chose.
func preparedElsewhere(raw []byte, pos Position, doc *document, enc string) (string, bool) {
	var r struct {
		Range
		Nested *Range `json:"range"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return "", false
	}
	rg := r.Range
	if r.Nested != nil {
		rg = *r.Nested
	}
	if rg == (Range{}) {
		return "", false // {defaultBehavior: true}: the server takes the position as given
	}
	before := func(a, b Position) bool { return a.Line < b.Line || a.Line == b.Line && a.Character < b.Character }
	if !before(pos, rg.Start) && !before(rg.End, pos) {
		return "", false
	}
	from, to := doc.offset(rg.Start, enc), doc.offset(rg.End, enc)
	if from > to {
		return "", true
	}
	return doc.text[from:to], true
}
