//go:build dart && cgo

package dart

// The sources are included by grammar_parser.c and grammar_scanner.c from the
// fetched folder; -w because they are generated third-party code whose
// warnings no one here can act on.

// #cgo CFLAGS: -std=c11 -w -I${SRCDIR}/../../../../.cache/tree-sitter-dart-1.0.0 -I${SRCDIR}/../../../../.cache/tree-sitter-dart-1.0.0/src
// typedef struct TSLanguage TSLanguage;
// const TSLanguage *tree_sitter_dart(void);
import "C"

import "unsafe"

// Built reports whether this binary holds the grammar.
const Built = true

// Language returns the grammar's TSLanguage pointer.
func Language() (unsafe.Pointer, error) {
	return unsafe.Pointer(C.tree_sitter_dart()), nil
}
