package engine

import (
	"path"
	"sort"
	"strings"
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"
	tsbash "github.com/tree-sitter/tree-sitter-bash/bindings/go"
	tsc "github.com/tree-sitter/tree-sitter-c/bindings/go"
	tscpp "github.com/tree-sitter/tree-sitter-cpp/bindings/go"
	tsgo "github.com/tree-sitter/tree-sitter-go/bindings/go"
	tsjava "github.com/tree-sitter/tree-sitter-java/bindings/go"
	tsjs "github.com/tree-sitter/tree-sitter-javascript/bindings/go"
	tspython "github.com/tree-sitter/tree-sitter-python/bindings/go"
	tsruby "github.com/tree-sitter/tree-sitter-ruby/bindings/go"
	tsrust "github.com/tree-sitter/tree-sitter-rust/bindings/go"
	tsts "github.com/tree-sitter/tree-sitter-typescript/bindings/go"
)

// Language is one shipped grammar and how patterns are parsed with it.
type Language struct {
	// Name is the identifier the tools accept ("go", "python", ...).
	Name string
	// Extensions are the file name suffixes that select this grammar.
	Extensions []string
	// Placeholder stands for '$' while a pattern is parsed: '$' itself
	// where the grammar accepts it inside identifiers, else a letter-like
	// rune that it does.
	Placeholder string
	// Ladder is the list of contexts a fragment is tried in, first clean
	// parse wins. Each context holds one "\x00" where the fragment goes.
	Ladder []Context

	ptr func() unsafe.Pointer
	ts  *sitter.Language
}

// Context is one rung of a pattern ladder.
type Context struct {
	Name     string // statement, expression, class member, declaration, program
	Template string // the fragment goes where "\x00" is
	// Indent, when set, is put before every line of a multi-line fragment
	// after the first (Python's block bodies need it).
	Indent string
	// Absorb, when set, is the terminator the template puts right after the
	// fragment that the fragment's node may end with: a Dart statement is
	// no node without its `;`, so `dispose($X)` is found as the statement
	// `dispose($X);`, and a match is reported without the `;` the user
	// did not write.
	Absorb string
}

// hole marks where a fragment goes in a Context template.
const hole = "\x00"

// micro is the placeholder where '$' cannot be part of an identifier: it
// is a letter in Unicode, so every shipped grammar lexes it as one.
const micro = "µ"

// bashPlaceholder stands for '$' in Bash: a variable's name (`for $V in`)
// is ASCII letters, digits and '_' only, so µ cannot stand there.
const bashPlaceholder = "__ag"

func ctx(name, tmpl string) Context { return Context{Name: name, Template: tmpl} }

// languages returns the grammars of Go modules; Dart, built from npm
// sources, comes from dartLanguages (lang_dart.go).
func languages() []*Language {
	cLike := func(member string) []Context {
		return []Context{
			ctx("statement", "void __f(void) {\n\x00\n}"),
			ctx("statement", "void __f(void) {\n\x00;\n}"),
			ctx("expression", "int __x = \x00;"),
			ctx(member, "struct __S {\n\x00;\n};"),
			// The fragment's own `;` ends a member: `unsigned int $F : $W;`.
			ctx(member, "struct __S {\n\x00\n};"),
			ctx("declaration", "\x00"),
			ctx("declaration", "\x00;"),
		}
	}
	return []*Language{
		{Name: "go", Extensions: []string{".go"}, Placeholder: micro, ptr: tsgo.Language, Ladder: []Context{
			// A statement first: at the top level `errors.New($MSG)`
			// reads as a type conversion, in a function body as the call.
			ctx("statement", "func __f() {\n\x00\n}"),
			ctx("declaration", "\x00"),
			ctx("expression", "var __x = \x00"),
			ctx("struct member", "type __T struct {\n\x00\n}"),
			ctx("interface member", "type __T interface {\n\x00\n}"),
		}},
		{Name: "python", Extensions: []string{".py", ".pyi"}, Placeholder: micro, ptr: tspython.Language, Ladder: []Context{
			ctx("statement", "\x00"),
			{Name: "statement", Template: "def __f():\n    \x00\n", Indent: "    "},
			ctx("expression", "__x = \x00"),
			{Name: "class member", Template: "class __C:\n    \x00\n", Indent: "    "},
		}},
		{Name: "javascript", Extensions: []string{".js", ".mjs", ".cjs", ".jsx"}, Placeholder: "$", ptr: tsjs.Language, Ladder: []Context{
			ctx("statement", "\x00"),
			ctx("expression", "(\x00)"),
			ctx("object member", "({\n\x00\n})"),
			ctx("class member", "class __C {\n\x00\n}"),
		}},
		{Name: "typescript", Extensions: []string{".ts", ".mts", ".cts"}, Placeholder: "$", ptr: tsts.LanguageTypescript, Ladder: []Context{
			ctx("statement", "\x00"),
			ctx("expression", "(\x00)"),
			ctx("object member", "({\n\x00\n})"),
			ctx("class member", "class __C {\n\x00\n}"),
			ctx("interface member", "interface __I {\n\x00\n}"),
		}},
		{Name: "tsx", Extensions: []string{".tsx"}, Placeholder: "$", ptr: tsts.LanguageTSX, Ladder: []Context{
			ctx("statement", "\x00"),
			ctx("expression", "(\x00)"),
			ctx("object member", "({\n\x00\n})"),
			ctx("class member", "class __C {\n\x00\n}"),
			ctx("interface member", "interface __I {\n\x00\n}"),
		}},
		{Name: "rust", Extensions: []string{".rs"}, Placeholder: micro, ptr: tsrust.Language, Ladder: []Context{
			ctx("statement", "fn __f() {\n\x00\n}"),
			ctx("statement", "fn __f() {\n\x00;\n}"),
			ctx("expression", "const __X: () = \x00;"),
			ctx("impl member", "impl __T {\n\x00\n}"),
			ctx("declaration", "\x00"),
		}},
		{Name: "java", Extensions: []string{".java"}, Placeholder: "$", ptr: tsjava.Language, Ladder: []Context{
			ctx("statement", "class __C { void __f() {\n\x00\n} }"),
			ctx("statement", "class __C { void __f() {\n\x00;\n} }"),
			ctx("expression", "class __C { Object __x = \x00; }"),
			ctx("class member", "class __C {\n\x00\n}"),
			ctx("declaration", "\x00"),
		}},
		{Name: "c", Extensions: []string{".c", ".h"}, Placeholder: "$", ptr: tsc.Language, Ladder: cLike("struct member")},
		{Name: "cpp", Extensions: []string{".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".c++", ".h++"}, Placeholder: "$", ptr: tscpp.Language, Ladder: append(cLike("struct member"), ctx("class member", "class __C {\n\x00\n};"))},
		{Name: "ruby", Extensions: []string{".rb", ".rake", ".gemspec"}, Placeholder: micro, ptr: tsruby.Language, Ladder: []Context{
			ctx("statement", "\x00"),
			ctx("statement", "def __f\n\x00\nend"),
			ctx("class member", "class C__\n\x00\nend"),
		}},
		{Name: "bash", Extensions: []string{".sh", ".bash"}, Placeholder: bashPlaceholder, ptr: tsbash.Language, Ladder: []Context{
			ctx("statement", "\x00"),
			ctx("statement", "__f() {\n\x00\n}"),
		}},
	}
}

// Registry holds the shipped grammars; it is read-only after New.
type Registry struct {
	byName map[string]*Language
	byExt  map[string]*Language
	names  []string
}

// NewRegistry loads every shipped grammar.
func NewRegistry() *Registry {
	r := &Registry{byName: map[string]*Language{}, byExt: map[string]*Language{}}
	for _, l := range append(languages(), dartLanguages()...) {
		l.ts = sitter.NewLanguage(l.ptr())
		r.byName[l.Name] = l
		r.names = append(r.names, l.Name)
		for _, e := range l.Extensions {
			r.byExt[e] = l
		}
	}
	sort.Strings(r.names)
	return r
}

// aliases are other spellings users type for a grammar.
var aliases = map[string]string{
	"golang": "go", "py": "python", "python3": "python", "js": "javascript", "jsx": "javascript",
	"ts": "typescript", "rs": "rust", "c++": "cpp", "cxx": "cpp", "rb": "ruby", "sh": "bash", "shell": "bash",
	"h": "c", "cc": "cpp",
}

// Lookup finds a grammar by identifier (case-insensitive, common aliases).
func (r *Registry) Lookup(name string) (*Language, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		n = a
	}
	l, ok := r.byName[n]
	return l, ok
}

// ForPath infers the grammar from a file name's extension.
func (r *Registry) ForPath(p string) (*Language, bool) {
	l, ok := r.byExt[strings.ToLower(path.Ext(p))]
	return l, ok
}

// Names lists the grammar identifiers, sorted.
func (r *Registry) Names() []string { return append([]string(nil), r.names...) }

// Matches reports whether p is a file of language l.
func (l *Language) Matches(p string) bool {
	e := strings.ToLower(path.Ext(p))
	for _, x := range l.Extensions {
		if x == e {
			return true
		}
	}
	return false
}
