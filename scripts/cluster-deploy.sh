#!/usr/bin/env bash
# sandboxd's chart as N replicas on the cluster of scripts/k8s-up.sh, through
# cmd/sandboxd-cluster (the Helm SDK, the chart compiled in):
#
#   scripts/cluster-deploy.sh deploy     # make cluster-deploy REPLICAS=N; last stdout line:
#                                        # {"urls": [...], "token": "...", "namespace": "...", "deployment": "..."}
#   scripts/cluster-deploy.sh undeploy   # make cluster-down's first half; nothing to do without a cluster
#
# Environment: REPLICAS (3), NAMESPACE (sandboxd-replicas), DEPLOY_FLAGS (more flags for
# sandboxd-cluster deploy, e.g. "--port 27900 --timeout 8m"), K8S_RUN_DIR (/var/lib/sandboxd-k8s), GO.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN="${K8S_RUN_DIR:-/var/lib/sandboxd-k8s}"
GO="${GO:-go}"
export PATH="$PATH:/usr/local/go/bin"
cmd="${1:-}"

case "$cmd" in
deploy | undeploy) ;;
*)
	echo "cluster-deploy: say deploy or undeploy (scripts/cluster-deploy.sh deploy)" >&2
	exit 2
	;;
esac

if [ ! -f "$RUN/env" ]; then
	if [ "$cmd" = undeploy ]; then
		echo "cluster-deploy: no cluster is up ($RUN/env is missing); nothing to undeploy" >&2
		exit 0
	fi
	echo "cluster-deploy: no cluster is up ($RUN/env is missing); run make cluster-up first" >&2
	exit 1
fi
# shellcheck disable=SC1091 # written by k8s-up.sh
. "$RUN/env"

mkdir -p "$ROOT/bin"
(cd "$ROOT" && "$GO" build -trimpath -o bin/sandboxd-cluster ./cmd/sandboxd-cluster) >&2

args=("$cmd" --namespace "${NAMESPACE:-sandboxd-replicas}")
if [ "$cmd" = deploy ]; then
	# shellcheck disable=SC2206 # DEPLOY_FLAGS is a list of words on purpose
	args+=(--replicas "${REPLICAS:-3}" ${DEPLOY_FLAGS:-})
fi
exec "$ROOT/bin/sandboxd-cluster" "${args[@]}"
