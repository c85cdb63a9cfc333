#!/usr/bin/env bash
# gofmt and go vet over the module's packages; any finding fails.
# Only the files `go list` builds are checked, so testdata fixtures may hold deliberately bad Go.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH=$PATH:/usr/local/go/bin
GO=${GO:-go}

# shellcheck disable=SC2016 # a Go template, not shell
mapfile -t files < <("$GO" list -f '{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{range .TestGoFiles}}{{$d}}/{{.}}
{{end}}{{range .XTestGoFiles}}{{$d}}/{{.}}
{{end}}{{range .IgnoredGoFiles}}{{$d}}/{{.}}
{{end}}' ./... | sed '/^$/d')

((${#files[@]})) || { echo "lint: go list found no Go files" >&2; exit 1; }
unformatted=$(gofmt -l "${files[@]}")
if [[ -n $unformatted ]]; then
	echo "gofmt: these files are not formatted; run gofmt -w on them:" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "gofmt: ${#files[@]} files clean"
"$GO" vet ./...
# The files only the shipped build compiles (tag dart: the Dart grammar, see scripts/fetch-dart-grammar.sh).
scripts/fetch-dart-grammar.sh >/dev/null
"$GO" vet -tags dart ./tools/astgrep/...
echo "go vet: clean"
