//go:build dart

// The generated parser of tree-sitter-dart, from the folder
// scripts/fetch-dart-grammar.sh fills (on the include path via dart.go).
#if __has_include("src/parser.c")
#include "src/parser.c"
#else
#error "tree-sitter-dart sources are missing from .cache/: run scripts/fetch-dart-grammar.sh (make build does)"
#endif
