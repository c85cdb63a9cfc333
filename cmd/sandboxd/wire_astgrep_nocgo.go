//go:build !cgo

package main

// wireAstgrep leaves ast_grep, ast_edit and resolve out of a build without
// cgo: the tree-sitter engine is C, so it is not wired and the tools do not
// register (DESIGN.md §4: they register when the engine is wired).
func wireAstgrep(w *wiring) error {
	w.log.Info("structural search tools off: sandboxd was built without cgo (CGO_ENABLED=0), so the tree-sitter engine is not wired")
	w.registry.Omit("this sandboxd was built without cgo, so the tree-sitter engine they stand on is not in it", "ast_grep", "ast_edit", "resolve")
	return nil
}
