#!/usr/bin/env bash
# Serves sandboxd for a person trying it out (`make run`, which builds bin/ first).
# BACKEND=auto picks docker when an engine answers (building the sandbox image if needed), else host.
# Environment: LISTEN (127.0.0.1:7788), DATA_DIR (./.data), BACKEND (auto|docker|host), CONFIG (file).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
LISTEN=${LISTEN:-127.0.0.1:7788}
DATA_DIR=${DATA_DIR:-./.data}
BACKEND=${BACKEND:-auto}
CONFIG=${CONFIG:-}

[[ -x bin/sandboxd && -x bin/sandbox-agent ]] || { echo "bin/sandboxd is missing; run make build first." >&2; exit 1; }

if [[ $BACKEND == auto ]]; then
	if command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; then
		BACKEND=docker
	else
		BACKEND=host
	fi
fi
case $BACKEND in
docker) images/build.sh ;;
host) ;;
*) echo "BACKEND=$BACKEND is not one this quick start knows; use auto, docker or host." >&2; exit 1 ;;
esac

mkdir -p "$DATA_DIR"
args=(serve --listen "$LISTEN" --data-dir "$DATA_DIR" --backend "$BACKEND")
[[ -n $CONFIG ]] && args+=(--config "$CONFIG")

cat <<INFO

sandboxd on http://$LISTEN/ (backend $BACKEND, data in $DATA_DIR)
token: $DATA_DIR/token (written on the first start when no tenants are configured)
try:   curl -s -H "Authorization: Bearer \$(cat $DATA_DIR/token)" http://$LISTEN/v1/sandboxes

INFO
exec bin/sandboxd "${args[@]}"
