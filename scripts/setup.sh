#!/usr/bin/env bash
# Prepares a Debian 12 machine for building and testing sandboxd. Idempotent: installs only what is
# missing and starts a Docker engine only when none answers.
#
#   - Debian packages: docker.io, debootstrap, git, make, procps, gcc and libc6-dev (go test -race needs
#     cgo), ca-certificates;
#   - a Docker engine: systemd's docker.service where systemd runs, else containerd and dockerd
#     started in the background (logs in $SETUP_LOG_DIR), waited for with a deadline;
#   - a check that a Go toolchain new enough for go.mod is on PATH (Debian's own is too old);
#   - gVisor: Debian's runsc registered as the engine's "runsc" runtime in /etc/docker/daemon.json
#     (merged into what is there), with runsc's own networking off (--network=none: this runsc
#     cannot start a sandbox in the engine's bridge network), and dockerd told to reload it (SIGHUP).
#
# Environment: SETUP_LOG_DIR (/var/log/sandboxd-setup), DOCKER_WAIT (seconds, 90).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SETUP_LOG_DIR=${SETUP_LOG_DIR:-/var/log/sandboxd-setup}
DOCKER_WAIT=${DOCKER_WAIT:-90}
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

log() { printf '[setup %3ds] %s\n' "$SECONDS" "$*" >&2; }
die() {
	printf '[setup] error: %s\n' "$*" >&2
	exit 1
}

as_root() {
	if [[ $(id -u) == 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "this step needs root ($*); run scripts/setup.sh as root."
	fi
}

# --- Debian packages ------------------------------------------------------------------------------

installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }

# curl: make build fetches the Dart grammar from the npm registry (scripts/fetch-dart-grammar.sh).
# python3, pip, venv: e2e's TestPythonClient runs clients/python's tests, and
# TestPythonClientInstallsOffline installs the package into a fresh venv with `pip install
# --no-index --no-build-isolation` (its build backend is in the tree: no PyPI, setuptools or wheel).
packages=(docker.io debootstrap git make gcc libc6-dev ca-certificates procps curl
	python3 python3-pip python3-venv runsc)
missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done
if ((${#missing[@]})); then
	log "installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
	log "packages present: ${packages[*]}"
fi

# --- Go --------------------------------------------------------------------------------------------

want_go=$(awk '$1 == "go" { print $2; exit }' "$root/go.mod")
command -v go >/dev/null ||
	die "no Go toolchain on PATH; install Go $want_go or newer (https://go.dev/dl) into /usr/local/go."
have_go=$(go env GOVERSION)
# sort -V orders versions; the wanted one must not sort after the one we have.
if [[ $(printf '%s\n%s\n' "go$want_go" "$have_go" | sort -V | tail -n1) != "$have_go" ]]; then
	die "Go $have_go is older than go.mod's $want_go; install a newer Go into /usr/local/go."
fi
log "go: $have_go"

# --- Docker engine ---------------------------------------------------------------------------------

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

# wait_for runs its command until it succeeds or the deadline passes.
wait_for() {
	local what=$1 deadline=$((SECONDS + $2))
	shift 2
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 1
	done
	log "$what is up"
}

containerd_answers() { timeout 5 ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1; }

start_engine() {
	if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
		log "starting docker.service"
		as_root systemctl start docker
		return
	fi
	as_root mkdir -p "$SETUP_LOG_DIR"
	# pgrep only looks: a daemon that is already starting is waited for, not doubled.
	if ! pgrep -x containerd >/dev/null; then
		log "starting containerd (log: $SETUP_LOG_DIR/containerd.log)"
		as_root setsid -f sh -c "exec containerd >>'$SETUP_LOG_DIR/containerd.log' 2>&1 </dev/null"
	fi
	wait_for containerd 30 containerd_answers ||
		die "containerd did not answer within 30 s; see $SETUP_LOG_DIR/containerd.log."
	if ! pgrep -x dockerd >/dev/null; then
		log "starting dockerd (log: $SETUP_LOG_DIR/dockerd.log)"
		as_root setsid -f sh -c \
			"exec dockerd --containerd=/run/containerd/containerd.sock >>'$SETUP_LOG_DIR/dockerd.log' 2>&1 </dev/null"
	fi
}

if engine_answers; then
	log "docker engine answers ($(docker version -f '{{.Server.Version}}' 2>/dev/null))"
else
	start_engine
	wait_for "docker engine" "$DOCKER_WAIT" engine_answers ||
		die "no Docker engine answered within ${DOCKER_WAIT}s; see $SETUP_LOG_DIR/dockerd.log, or the log of the dockerd that was already running."
fi

# --- gVisor ----------------------------------------------------------------------------------------

# runsc_registered: the engine lists a runtime named runsc.
runsc_registered() { docker info -f '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

daemon_json=/etc/docker/daemon.json
if runsc_registered; then
	log "docker lists the runsc runtime"
else
	log "registering runsc in $daemon_json"
	# Merged with python3 (installed above) so that the file's other keys stay as they are.
	as_root python3 - "$daemon_json" <<'PY'
import json, os, sys
path = sys.argv[1]
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read().strip()
    cfg = json.loads(text) if text else {}
cfg.setdefault("runtimes", {})["runsc"] = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}
os.makedirs(os.path.dirname(path), exist_ok=True)
tmp = path + ".sandboxd-tmp"
with open(tmp, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
PY
	# dockerd reloads its runtimes on SIGHUP: running containers are left alone.
	if pid=$(pgrep -xo dockerd); then
		as_root kill -HUP "$pid"
	fi
	wait_for "runsc runtime" 30 runsc_registered ||
		die "docker does not list the runsc runtime 30 s after $daemon_json was changed; restart dockerd and check its log."
fi
log "done"
