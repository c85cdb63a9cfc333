package lsp

import (
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
