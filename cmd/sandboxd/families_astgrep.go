//go:build cgo

package main

import (
	"github.com/sandboxd/sandboxd/tools/astgrep"
	"github.com/sandboxd/sandboxd/tools/family"
)

// structuralSearch is ast_grep, ast_edit and resolve over the tree-sitter
// engine, which is C: a build without cgo leaves them out (the other file).
func structuralSearch() family.Family { return astgrep.Family() }
