#!/usr/bin/env bash
# Fetches the Dart grammar's C sources (npm tree-sitter-dart, pinned by version and integrity) into
# ./.cache/tree-sitter-dart-$version/, where tools/astgrep/engine/dart compiles them through cgo
# under the build tag `dart` (`make build` and `make test` run this first). Nothing of the grammar
# is committed: the folder ignores itself. Safe to rerun: a verified copy is kept and no network is
# used then. Prints the folder's path.
#
#   DART_GRAMMAR_TARBALL=/path/to/tree-sitter-dart-1.0.0.tgz   use a local copy of the tarball
#                                                              (still checked against the integrity)
set -euo pipefail

version=1.0.0
integrity=sha512-Ve5YMPJjjGW9LEsO+MngAOibQsw5obFp+bUT41pvwdcXWRwJImOWs3eaPi6AubEiBmc09qvhdvxeIXvxlhMnug==
url=https://registry.npmjs.org/tree-sitter-dart/-/tree-sitter-dart-$version.tgz

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
dir="$cache/tree-sitter-dart-$version"
die() { echo "fetch-dart-grammar: $*" >&2; exit 1; }

mkdir -p "$cache"
[ -f "$cache/.gitignore" ] || printf '*\n' >"$cache/.gitignore"

# The stamp holds the integrity the sources were extracted from: a copy from another pin is redone.
if [ -f "$dir/.integrity" ] && [ "$(cat "$dir/.integrity")" = "$integrity" ] &&
	[ -f "$dir/src/parser.c" ] && [ -f "$dir/src/scanner.c" ] && [ -f "$dir/src/tree_sitter/parser.h" ]; then
	echo "$dir"
	exit 0
fi

tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tgz=$tmp/tree-sitter-dart-$version.tgz
from=$url
if [ -n "${DART_GRAMMAR_TARBALL:-}" ]; then
	from=$DART_GRAMMAR_TARBALL
	cp "$DART_GRAMMAR_TARBALL" "$tgz" || die "cannot read DART_GRAMMAR_TARBALL=$DART_GRAMMAR_TARBALL"
elif command -v curl >/dev/null 2>&1; then
	curl -fsSL --retry 3 --connect-timeout 20 --max-time 300 -o "$tgz" "$url" ||
		die "cannot download $url; check the network (the npm registry must be reachable) or set DART_GRAMMAR_TARBALL to a local copy"
elif command -v wget >/dev/null 2>&1; then
	wget -q --tries=3 --timeout=60 -O "$tgz" "$url" ||
		die "cannot download $url; check the network (the npm registry must be reachable) or set DART_GRAMMAR_TARBALL to a local copy"
else
	die "neither curl nor wget is installed; install one (apt-get install curl) and rerun"
fi

# npm's integrity is the base64 of the tarball's SHA-512.
want=$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
got=$(sha512sum "$tgz" | cut -d' ' -f1)
[ "$got" = "$want" ] || die "$from does not match the pinned integrity $integrity (sha512 $got); the download is corrupt or the package was replaced, so nothing was extracted"

tar -xzf "$tgz" -C "$tmp" package/LICENSE package/src/parser.c package/src/scanner.c package/src/tree_sitter ||
	die "the tarball lacks package/src/parser.c, scanner.c or tree_sitter/; it is not the tree-sitter-dart $version this build expects"
printf '%s\n' "$integrity" >"$tmp/package/.integrity"
rm -rf "$dir"
mv "$tmp/package" "$dir"
echo "fetch-dart-grammar: tree-sitter-dart $version verified ($integrity)" >&2
echo "$dir"
