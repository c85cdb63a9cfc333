//go:build dart

// The external scanner of tree-sitter-dart (see grammar_parser.c).
#if __has_include("src/scanner.c")
#include "src/scanner.c"
#else
#error "tree-sitter-dart sources are missing from .cache/: run scripts/fetch-dart-grammar.sh (make build does)"
#endif
