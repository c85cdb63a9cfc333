// Package engine is the structural search engine behind ast_grep and
// ast_edit: tree-sitter grammars (the official Go binding with pinned
// grammar modules), patterns compiled through a per-language ladder of
// contexts, matching with ast-grep's metavariable semantics, rewrite
// templates, and a search that reads files in batches from a Source,
// drops files lacking the pattern's literal tokens, parses the rest in
// parallel and caches trees and per-file results by (path, size, mtime).
//
// Parsing and flattening run in one call into C per file; the tree is then
// a pair of Go slices, so matching never crosses into C and a cached tree
// holds no C memory. The engine works on any Source: the tools read through
// the sandbox agent, tests and benchmarks read a local directory.
package engine
