#!/usr/bin/env bash
# Checks that a sandbox image's tools really work: language servers and debug adapters must answer
# `initialize`, pinned versions must match images/versions.env, and Go and C must compile offline.
# Usage: images/verify.sh [IMAGE]   (default sandboxd-sandbox:latest)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${1:-sandboxd-sandbox:latest}
# shellcheck source=images/versions.env
source "$here/versions.env"
go_version=$(docker image inspect -f '{{index .Config.Labels "io.sandboxd.go"}}' "$image" 2>/dev/null || true)

# --network none: the sandbox's default, and proof that nothing is fetched at run time.
# The script goes in on stdin so this works against a remote engine too.
timeout 600 docker run --rm -i --network none "$image" python3 - \
	"go=$go_version" "gopls=$GOPLS_VERSION" "dlv=$DLV_VERSION" "pyright=$PYRIGHT_VERSION" \
	"tsls=$TSLS_VERSION" "typescript=$TYPESCRIPT_VERSION" <"$here/verify.py"
