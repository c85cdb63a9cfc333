// Package dart is the Dart grammar for the structural search: tree-sitter-dart
// from npm, compiled through cgo from sources scripts/fetch-dart-grammar.sh
// puts in the repository's .cache/ (pinned by version and integrity; none of
// it is committed). It is compiled only under the build tag `dart`, which
// `make build` and `make test` set after fetching; without the tag (a plain
// `go build ./...`) the package still builds and Language says why there is
// no grammar.
package dart

// Version and Integrity pin the npm package the sources come from;
// scripts/fetch-dart-grammar.sh holds the same pair.
const (
	Version   = "1.0.0"
	Integrity = "sha512-Ve5YMPJjjGW9LEsO+MngAOibQsw5obFp+bUT41pvwdcXWRwJImOWs3eaPi6AubEiBmc09qvhdvxeIXvxlhMnug=="
)

// NotBuilt is the error message a binary built without the grammar gives.
const NotBuilt = "Dart grammar not built: run make build (fetches tree-sitter-dart " + Version + " from npm)"
