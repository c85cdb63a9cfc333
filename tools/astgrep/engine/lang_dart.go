package engine

import (
	"strings"
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine/dart"
)

// dartLanguages returns Dart when this binary holds its grammar (package
// dart, built under the tag `dart`) and the grammar's ABI is one the
// tree-sitter runtime reads; otherwise none, and Registry.Unavailable says
// why.
func dartLanguages() []*Language {
	ptr, err := dartGrammar()
	if err != nil {
		return nil
	}
	return []*Language{{
		Name: "dart", Extensions: []string{".dart"},
		// Dart identifiers may hold '$', so a metavariable is one token.
		Placeholder: "$",
		ptr:         func() unsafe.Pointer { return ptr },
		Ladder: []Context{
			// A fragment that is a whole statement with its own `;` or
			// block: `if ($X != null) { $X.dispose(); }`.
			ctx("statement", "void __f() {\n\x00\n}"),
			// The grammar has no call node: `dispose($X)` is an
			// identifier and a selector, one node only as the statement
			// with its `;` (bare, or at the top level, it reads as a
			// function signature). The `;` is put after the fragment and
			// taken into its node.
			{Name: "statement", Template: "void __f() {\n\x00;\n}", Absorb: ";"},
			ctx("expression", "var __x = \x00;"),
			ctx("class member", "class __C {\n\x00\n}"),
			ctx("declaration", "\x00"),
		},
	}}
}

// dartGrammar returns the Dart grammar, or why this binary cannot use it.
func dartGrammar() (unsafe.Pointer, error) {
	ptr, err := dart.Language()
	if err != nil {
		return nil, err
	}
	if err := checkABI("tree-sitter-dart "+dart.Version, sitter.NewLanguage(ptr).AbiVersion()); err != nil {
		return nil, err
	}
	return ptr, nil
}

// checkABI refuses a grammar generated for a parse-table ABI the linked
// tree-sitter runtime does not read: it would crash or misparse, not fail.
func checkABI(grammar string, abi uint32) error {
	if abi < sitter.MIN_COMPATIBLE_LANGUAGE_VERSION || abi > sitter.LANGUAGE_VERSION {
		return errdefs.FailedPrecondition("the Dart grammar (%s) was generated for tree-sitter ABI %d, but go-tree-sitter reads ABI %d to %d; pin a tree-sitter-dart release in that range in scripts/fetch-dart-grammar.sh",
			grammar, abi, sitter.MIN_COMPATIBLE_LANGUAGE_VERSION, sitter.LANGUAGE_VERSION)
	}
	return nil
}

// Unavailable reports why a language the tools know of is not in this
// binary: today only Dart can be missing (built without its grammar, or
// with one of the wrong ABI). name may be an alias; ok is false for a
// language that is registered or unknown.
func (r *Registry) Unavailable(name string) (reason string, ok bool) {
	if normalize(name) != "dart" || r.byName["dart"] != nil {
		return "", false
	}
	if _, err := dartGrammar(); err != nil {
		return err.Error(), true
	}
	return "", false
}

// UnavailableForPath is Unavailable for the language of a file name.
func (r *Registry) UnavailableForPath(p string) (string, bool) {
	if (&Language{Extensions: []string{".dart"}}).Matches(p) {
		return r.Unavailable("dart")
	}
	return "", false
}

// normalize lowers a language name and resolves aliases, as Lookup does.
func normalize(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		return a
	}
	return n
}
