#!/usr/bin/env bash
# Serves sandboxd for a person trying it out (`make run`, which builds bin/ first).
# BACKEND=auto picks docker when an engine answers (building the sandbox image if needed), else host.
# Environment: LISTEN (127.0.0.1:7788), DATA_DIR (./.data), BACKEND (auto|docker|host), CONFIG (file).
# Once the daemon answers it prints the console's URL and the admin token to paste into it.
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

# Once the daemon answers, say where the console is and which token to paste
# into it. The poller runs beside the daemon (which replaces this shell, so
# signals and the exit status are the daemon's own) and gives up when the
# daemon is gone or after a deadline.
host=${LISTEN%:*}
port=${LISTEN##*:}
[[ -z $host || $host == 0.0.0.0 || $host == "[::]" ]] && host=127.0.0.1
url="http://$host:$port"
daemon=$$
answers() (
	# GET /healthz over bash's /dev/tcp (no curl needed on a fresh machine),
	# in a subshell so that the redirections end with it.
	exec 2>/dev/null 3<>"/dev/tcp/$host/$port" || exit 1
	printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$host:$port" >&3
	IFS= read -r -t 5 status <&3 || exit 1
	[[ $status == *" 200 "* ]]
)
banner() {
	local deadline=$((SECONDS + 300))
	until answers; do
		kill -0 "$daemon" 2>/dev/null || return 0
		if ((SECONDS > deadline)); then
			echo "sandboxd has not answered on $url for 5 minutes; its log above says why." >&2
			return 0
		fi
		sleep 0.5
	done
	local token=""
	# The admin token is only the token to use when the daemon accepts it
	# (with tenants in CONFIG it does not, even if an old file is there).
	if [[ -s $DATA_DIR/token ]] && bin/sandboxd run list --addr "$url" --data-dir "$DATA_DIR" --json >/dev/null 2>&1; then
		token=$(<"$DATA_DIR/token")
	fi
	echo
	echo "sandboxd is up (backend $BACKEND, data in $DATA_DIR)"
	echo
	echo "  console: $url/"
	if [[ -n $token ]]; then
		echo "  token:   $token"
		echo "           (paste it into the console; the CLI reads it from $DATA_DIR/token)"
	else
		echo "  token:   one of the tenants' in $CONFIG (bin/sandboxd token new --tenant NAME makes one)"
	fi
	echo
	if [[ -z $token ]]; then
		echo "  env:     export SANDBOXD_ADDR=$url SANDBOXD_TOKEN=...   (the CLI's address and a tenant's token)"
	elif [[ $url != http://127.0.0.1:7788 || ( $DATA_DIR != ./.data && $DATA_DIR != .data ) ]]; then
		echo "  env:     export SANDBOXD_ADDR=$url SANDBOXD_DATA_DIR=$DATA_DIR   (the CLI's defaults otherwise)"
	fi
	echo "  try:     bin/sandboxd sandbox create --conversation c1"
	echo "           bin/sandboxd run create --conversation c1"
	echo "           bin/sandboxd help"
	echo
}
banner &
exec bin/sandboxd "${args[@]}"
