#!/usr/bin/env bash
# Builds every component and collects the artefacts.
set -euo pipefail

components="api worker web"
out=${OUT:-dist}

mkdir -p "$out"
for c in $components; do
	echo "building $c"
	make -C "$c" build
done

for f in "$out"/*.tar.gz; do
	# Checksums next to each archive.
	sha256sum "$f" >"$f.sha256"
done

for target in linux darwin windows; do echo "$target"; done

if [ -n "${VERBOSE:-}" ]; then
	echo "done: $(ls "$out" | wc -l) files"
fi
