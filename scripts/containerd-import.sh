#!/usr/bin/env bash
# Copies a Docker-built image into containerd's sandboxd namespace (nothing
# can be pulled here, so the containerd backend's images come from Docker),
# and unpacks it for the overlayfs snapshotter. Skips the copy when
# containerd already holds an image with the same config digest.
#
#   scripts/containerd-import.sh [IMAGE] [NAMESPACE]
#
# IMAGE defaults to sandboxd-sandbox:latest, NAMESPACE to sandboxd
# (CONTAINERD_ADDRESS overrides the socket).
set -euo pipefail

image="${1:-sandboxd-sandbox:latest}"
ns="${2:-${SANDBOXD_CONTAINERD_NAMESPACE:-sandboxd}}"
addr="${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}"

command -v docker >/dev/null || { echo "containerd-import: docker is not installed; build $image with Docker first" >&2; exit 1; }
command -v ctr >/dev/null || { echo "containerd-import: ctr is not installed (it comes with the containerd package)" >&2; exit 1; }

id="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null)" || {
	echo "containerd-import: $image is not in Docker; build it with \`make images\`" >&2
	exit 1
}

# Docker names short references docker.io/library/NAME:TAG on import.
ref="$image"
case "$ref" in
*/*/*) ;;
*/*) first="${ref%%/*}"; case "$first" in *.*|*:*|localhost) ;; *) ref="docker.io/$ref" ;; esac ;;
*) ref="docker.io/library/$ref" ;;
esac
case "${ref##*/}" in *:*|*@*) ;; *) ref="$ref:latest" ;; esac

have="$(ctr -a "$addr" -n "$ns" images ls name=="$ref" 2>/dev/null | awk 'NR>1 {print $3}')"
if [ -n "$have" ]; then
	cfg="$(ctr -a "$addr" -n "$ns" content get "$have" 2>/dev/null | sed -n 's/.*"config":{[^}]*"digest":"\([^"]*\)".*/\1/p')"
	if [ "$cfg" = "$id" ]; then
		echo "containerd-import: $ref is up to date in namespace $ns"
		exit 0
	fi
fi

echo "containerd-import: copying $image from Docker into containerd namespace $ns as $ref"
docker save "$image" | ctr -a "$addr" -n "$ns" images import --snapshotter overlayfs - >/dev/null
echo "containerd-import: $ref ready"
