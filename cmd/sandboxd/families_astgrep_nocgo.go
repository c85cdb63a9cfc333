//go:build !cgo

package main

import "github.com/sandboxd/sandboxd/tools/family"

// structuralSearch leaves ast_grep, ast_edit and resolve out of a build
// without cgo: the tree-sitter engine is C, so the tools do not register
// and a run's tool list says why (DESIGN.md §4).
func structuralSearch() family.Family { return noStructuralSearch{} }

type noStructuralSearch struct{ family.Base }

func (noStructuralSearch) Name() string { return "astgrep" }

func (noStructuralSearch) Register(s *family.Setup) error {
	s.Log.Info("structural search tools off: sandboxd was built without cgo (CGO_ENABLED=0), so the tree-sitter engine is not wired")
	s.Omit("this sandboxd was built without cgo, so the tree-sitter engine they stand on is not in it", "ast_grep", "ast_edit", "resolve")
	return nil
}
