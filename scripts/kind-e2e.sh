#!/usr/bin/env bash
# The cluster suites (the backend suite, the chart install and the e2e test)
# against a kind cluster, for machines where kind can pull its node image
# (`make kind-e2e`). kind is built from the Go module proxy and cached; the
# cluster is deleted on every exit. Machines without a registry cannot pull
# the node image: there `make test` (or `make cluster-up`) runs the same
# suites on a cluster built from the module proxy instead.
#
#   KIND_NODE_IMAGE=kindest/node:v1.33.1 make kind-e2e   # another node image
set -euo pipefail

KIND_VERSION="${KIND_VERSION:-v0.33.0}"
CLUSTER="${KIND_CLUSTER:-sandboxd-e2e}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${KIND_CACHE:-/var/cache/sandboxd-kind}"
GO="${GO:-go}"
export PATH="$PATH:/usr/local/go/bin"

log() { echo "kind-e2e: $*" >&2; }
die() { echo "kind-e2e: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker is missing; kind runs its node as a Docker container (apt-get install -y docker.io)"
docker info >/dev/null 2>&1 || die "no Docker engine answers; start dockerd (scripts/setup.sh does) and run again"

kind="$CACHE/$KIND_VERSION/kind"
if [ ! -x "$kind" ]; then
	log "building kind $KIND_VERSION from the module proxy"
	mkdir -p "$(dirname "$kind")"
	GOBIN="$(dirname "$kind")" CGO_ENABLED=0 "$GO" install "sigs.k8s.io/kind@$KIND_VERSION" ||
		die "kind $KIND_VERSION cannot be built from the module proxy; set KIND_VERSION to a version it serves"
fi

(cd "$ROOT" && make build images images-sandboxd)

work=$(mktemp -d)
export KUBECONFIG="$work/kubeconfig"
cleanup() {
	"$kind" delete cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

create=(create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" --wait 180s)
[ -n "${KIND_NODE_IMAGE:-}" ] && create+=(--image "$KIND_NODE_IMAGE")
if ! "$kind" "${create[@]}" 2>"$work/create.log"; then
	cat "$work/create.log" >&2
	if grep -qiE 'pull|manifest|registry|dial tcp|i/o timeout' "$work/create.log"; then
		die "kind could not pull its node image (no registry reachable from this machine); run \`make test\` or \`make cluster-up\` here instead: they build the cluster from the module proxy"
	fi
	die "kind could not create the cluster (its output is above)"
fi

log "loading the images into the node"
"$kind" load docker-image --name "$CLUSTER" sandboxd:latest sandboxd-sandbox:latest

export SANDBOXD_TEST_KUBERNETES=1 SANDBOXD_TEST_DOCKER=1
export SANDBOXD_TEST_IMAGE=sandboxd-sandbox:latest SANDBOXD_TEST_K8S_AGENT_IMAGE=sandboxd:latest
export SANDBOXD_BIN="$ROOT/bin/sandboxd" SANDBOXD_AGENT_BIN="$ROOT/bin/sandbox-agent"
cd "$ROOT"
"$GO" test -race -count=1 -timeout 30m -v -run 'Cluster|Kubernetes|Chart' ./sandbox/kubernetes/ ./e2e/
