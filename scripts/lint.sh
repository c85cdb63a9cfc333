#!/usr/bin/env bash
# gofmt, go vet and staticcheck over the module's packages, then the layering check (which packages
# may import which: internal/lint); any finding fails.
# Only the files `go list` builds are checked, so testdata fixtures may hold deliberately bad Go.
# staticcheck (its checks: staticcheck.conf) is pinned below and built from the Go module proxy into
# ./.tools/ on first use, so a fresh machine needs nothing but Go.
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

# staticcheck and the layering check both report before a finding of either fails the lint.
failed=0

# staticcheck 2026.2.2, the release built for Go 1.26; a new pin installs beside the old one.
staticcheck_version=v0.8.2
staticcheck=$PWD/.tools/staticcheck-$staticcheck_version/staticcheck
if [[ ! -x $staticcheck ]]; then
	mkdir -p .tools
	# The folder ignores itself so nothing here is ever committed.
	[[ -f .tools/.gitignore ]] || printf '*\n' >.tools/.gitignore
	echo "staticcheck: installing $staticcheck_version into ${staticcheck%/*}" >&2
	GOBIN=${staticcheck%/*} "$GO" install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
# Both builds at once: a finding in either fails, and code counts as unused only when neither
# build uses it (tag dart: the shipped binary's grammar; tag commithook: the agent the crash tests build).
if ! "$staticcheck" -matrix ./... <<'EOF'
untagged:
tagged: -tags=dart,commithook
EOF
then
	echo "staticcheck: fix the findings above; a check that must not apply is turned off in staticcheck.conf, with the reason beside it" >&2
	failed=1
else
	echo "staticcheck: clean"
fi

# The imports run one way: no tool imports the API or a backend, the tools' shared test harness
# names no engine (the rules and their reasons: internal/lint/layering_test.go).
if "$GO" test -count=1 ./internal/lint; then
	echo "layering: clean"
else
	failed=1
fi
exit "$failed"
