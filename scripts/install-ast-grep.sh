#!/usr/bin/env bash
# Installs the ast-grep CLI (npm @ast-grep/cli, pinned) into ./.tools/ast-grep,
# the peer the structural-search differential test and benchmark run against.
# Safe to rerun: an install of the right version is kept. Prints the binary's path.
set -euo pipefail

version=0.51.1
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.tools/ast-grep"
bin="$dir/node_modules/.bin/ast-grep"

mkdir -p "$dir"
# The folder ignores itself so nothing here is ever committed.
[ -f "$root/.tools/.gitignore" ] || printf '*\n' >"$root/.tools/.gitignore"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "ast-grep $version" ]; then
	echo "$bin"
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "install-ast-grep: npm is missing; installing Debian's nodejs and npm" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >&2
	else
		echo "install-ast-grep: npm is not installed; install nodejs and npm (apt-get install nodejs npm) and rerun" >&2
		exit 1
	fi
fi
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@ast-grep/cli@$version" >&2
"$bin" --version >&2
echo "$bin"
