#!/usr/bin/env bash
# Vendors the console's terminal emulator, xterm.js (npm @xterm/xterm and @xterm/addon-fit, pinned
# by version and integrity), into api/ui/vendor/, which go:embed puts into bin/sandboxd (`make
# build` runs this first). Nothing of it is committed: api/ui/vendor/ is git-ignored, and a build
# without it serves a stub that says the terminal is not built. Safe to rerun: the verified
# tarballs are kept in ./.cache/ and no network is used then.
#
#   XTERM_TARBALL_DIR=/path/with/tarballs   use local copies (xterm-6.0.0.tgz, addon-fit-0.11.0.tgz),
#                                           still checked against the integrity
set -euo pipefail

xterm_version=6.0.0
fit_version=0.11.0
# name version integrity (npm's, from the registry's metadata: dist.integrity)
packages=(
	"xterm $xterm_version sha512-TQwDdQGtwwDt+2cgKDLn0IRaSxYu1tSUjgKarSDkUM0ZNiSRXFpjxEsvc/Zgc5kq5omJ+V0a8/kIM2WD3sMOYg=="
	"addon-fit $fit_version sha512-jYcgT6xtVYhnhgxh3QgYDnnNMYTcf8ElbxxFzX0IZo+vabQqSPAjC3c1wJrKB5E19VwQei89QCiZZP86DCPF7g=="
)

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
out="$root/api/ui/vendor"
die() { echo "vendor-xterm: $*" >&2; exit 1; }

mkdir -p "$cache"
[ -f "$cache/.gitignore" ] || printf '*\n' >"$cache/.gitignore"

# hexof prints the hex SHA-512 an npm integrity string stands for.
hexof() { printf '%s' "${1#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n'; }

# fetch name version integrity: a verified tarball in .cache/, downloaded only when missing or wrong.
fetch() {
	local name=$1 version=$2 integrity=$3
	local tgz="$cache/xterm-$name-$version.tgz" want
	local url="https://registry.npmjs.org/@xterm/$name/-/$name-$version.tgz"
	want=$(hexof "$integrity")
	if [ -f "$tgz" ] && [ "$(sha512sum "$tgz" | cut -d' ' -f1)" = "$want" ]; then
		return 0
	fi
	local tmp from=$url
	tmp=$(mktemp "$cache/.xterm.XXXXXX")
	if [ -n "${XTERM_TARBALL_DIR:-}" ]; then
		from="$XTERM_TARBALL_DIR/$name-$version.tgz"
		cp "$from" "$tmp" || { rm -f "$tmp"; die "cannot read $from (XTERM_TARBALL_DIR)"; }
	elif command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 --connect-timeout 20 --max-time 300 -o "$tmp" "$url" ||
			{ rm -f "$tmp"; die "cannot download $url; check the network (the npm registry must be reachable) or set XTERM_TARBALL_DIR to a folder with the tarballs"; }
	elif command -v wget >/dev/null 2>&1; then
		wget -q --tries=3 --timeout=60 -O "$tmp" "$url" ||
			{ rm -f "$tmp"; die "cannot download $url; check the network (the npm registry must be reachable) or set XTERM_TARBALL_DIR to a folder with the tarballs"; }
	else
		die "neither curl nor wget is installed; install one (apt-get install curl) and rerun"
	fi
	local got
	got=$(sha512sum "$tmp" | cut -d' ' -f1)
	if [ "$got" != "$want" ]; then
		rm -f "$tmp"
		die "$from does not match the pinned integrity $integrity (sha512 $got); the download is corrupt or the package was replaced, so nothing was vendored"
	fi
	mv "$tmp" "$tgz"
	echo "vendor-xterm: @xterm/$name $version verified ($integrity)" >&2
}

# The stamp names the pins the folder was filled from: other pins, or a file gone, redo it.
stamp=$(printf '%s\n' "${packages[@]}")
files=(xterm.js xterm.css addon-fit.js LICENSE.xterm LICENSE.addon-fit)
complete=1
for f in "${files[@]}"; do [ -f "$out/$f" ] || complete=0; done
if [ "$complete" = 1 ] && [ -f "$out/.pins" ] && [ "$(cat "$out/.pins")" = "$stamp" ]; then
	echo "$out"
	exit 0
fi

for p in "${packages[@]}"; do
	# shellcheck disable=SC2086
	fetch $p
done

tmp=$(mktemp -d "$cache/.xterm-out.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
x="$cache/xterm-xterm-$xterm_version.tgz" f="$cache/xterm-addon-fit-$fit_version.tgz"
mkdir "$tmp/x" "$tmp/f" "$tmp/vendor"
tar -xzf "$x" -C "$tmp/x" package/lib/xterm.js package/css/xterm.css package/LICENSE ||
	die "$x lacks lib/xterm.js, css/xterm.css or LICENSE; it is not the @xterm/xterm this build expects"
tar -xzf "$f" -C "$tmp/f" package/lib/addon-fit.js package/LICENSE ||
	die "$f lacks lib/addon-fit.js or LICENSE; it is not the @xterm/addon-fit this build expects"
cp "$tmp/x/package/lib/xterm.js" "$tmp/x/package/css/xterm.css" "$tmp/f/package/lib/addon-fit.js" "$tmp/vendor/"
cp "$tmp/x/package/LICENSE" "$tmp/vendor/LICENSE.xterm"
cp "$tmp/f/package/LICENSE" "$tmp/vendor/LICENSE.addon-fit"
printf '%s\n' "$stamp" >"$tmp/vendor/.pins"
rm -rf "$out"
mv "$tmp/vendor" "$out"
echo "$out"
