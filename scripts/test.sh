#!/usr/bin/env bash
# The one test command (`make test`; CI's .ci/run calls exactly that). On a fresh Debian 12 machine
# it does its own set-up: installs Docker and debootstrap where missing, starts an engine where none
# runs, builds the binaries and the sandbox image, then runs lint, the unit and integration tests
# (real Docker, -race), the end-to-end tests against the built binaries and every benchmark once at
# minimal size (a smoke run: BENCHMARKS.md is left alone); last it builds a
# single-node Kubernetes from the Go module proxy (binaries cached in /var/cache/sandboxd-k8s,
# outside the checkout), installs the chart there and runs the cluster suites, then tears the
# cluster down whatever happened. SANDBOXD_TEST_KUBERNETES=0 leaves the cluster part out.
# Logs go to ./artifacts/ (TEST_TIMEOUT bounds each go test run; default 30m).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin
GO=${GO:-go}
# The build tags of the shipped binary (make build's GOTAGS): `dart` compiles the Dart grammar that
# make build fetches into .cache/.
GOTAGS=${GOTAGS:-dart}
TEST_TIMEOUT=${TEST_TIMEOUT:-30m}
ARTIFACTS=$root/artifacts
rm -rf "$ARTIFACTS"
mkdir -p "$ARTIFACTS"

start=$SECONDS
section() { printf '\n==== [%4ds] %s ====\n' "$((SECONDS - start))" "$*"; }

section "set-up (scripts/setup.sh)"
scripts/setup.sh 2>&1 | tee "$ARTIFACTS/setup.log"

section "test tools (chromium for the web console test)"
scripts/install-browser.sh 2>&1 | tee "$ARTIFACTS/install-browser.log"

section "test tools (the ast-grep CLI, the structural search's differential peer)"
scripts/install-ast-grep.sh 2>&1 | tee "$ARTIFACTS/ast-grep.log"

section "build (make build)"
make build 2>&1 | tee "$ARTIFACTS/build.log"

section "images (make images)"
make images 2>&1 | tee "$ARTIFACTS/images.log"

section "images for containerd (scripts/containerd-import.sh)"
scripts/containerd-import.sh sandboxd-sandbox:latest 2>&1 | tee "$ARTIFACTS/containerd-import.log"

section "lint (gofmt, go vet, staticcheck, layering; scripts/lint.sh)"
scripts/lint.sh 2>&1 | tee "$ARTIFACTS/lint.log"

# What the integration and e2e tests read: they skip their Docker cases unless SANDBOXD_TEST_DOCKER=1.
export SANDBOXD_TEST_DOCKER=1
export SANDBOXD_TEST_CONTAINERD=1
export SANDBOXD_TEST_IMAGE=sandboxd-sandbox:latest
export SANDBOXD_BIN=$root/bin/sandboxd
export SANDBOXD_AGENT_BIN=$root/bin/sandbox-agent
export SANDBOXD_ARTIFACTS=$ARTIFACTS

# One run covers the unit tests and the Docker-gated integration tests of every package but e2e.
mapfile -t pkgs < <("$GO" list ./... | grep -v '/e2e\(/\|$\)')
section "unit + integration (go test -race, ${#pkgs[@]} packages, real Docker)"
"$GO" test -race -count=1 -tags "$GOTAGS" -timeout "$TEST_TIMEOUT" "${pkgs[@]}" 2>&1 | tee "$ARTIFACTS/test-unit-integration.log"

# A build without the grammar (a plain `go build`) must say why Dart is missing.
section "structural search without the Dart grammar (go test -race, no tags)"
"$GO" test -race -count=1 -timeout "$TEST_TIMEOUT" -run 'Dart' ./tools/astgrep/... 2>&1 | tee "$ARTIFACTS/test-astgrep-nodart.log"

mapfile -t e2e < <("$GO" list ./e2e/... 2>/dev/null || true)
if ((${#e2e[@]})); then
	section "e2e (go test -race ./e2e/..., built binaries over HTTP)"
	"$GO" test -race -count=1 -tags "$GOTAGS" -timeout "$TEST_TIMEOUT" -v "${e2e[@]}" 2>&1 | tee "$ARTIFACTS/test-e2e.log"
else
	echo "error: no e2e package under ./e2e; the end-to-end tests must exist." >&2
	exit 1
fi

# Every benchmark family once at minimal size, so none can stop building or running unnoticed;
# each renders its section into a temporary copy of BENCHMARKS.md and reads it back. The cluster's
# families run below, while the cluster is up.
section "benchmarks, smoke (BENCH_SMOKE=1 scripts/bench.sh; BENCHMARKS.md left alone)"
GO=$GO BENCH_SMOKE=1 BENCH_SKIP='kubernetes replicas' BENCH_GOFLAGS="-race -tags $GOTAGS" scripts/bench.sh 2>&1 | tee "$ARTIFACTS/bench-smoke.log"

# The cluster: built when the module proxy can serve Kubernetes (it can on the machines this runs
# on); a machine that cannot build it skips these suites and says so, a cluster that builds but
# fails its tests fails the run.
if [ "${SANDBOXD_TEST_KUBERNETES:-1}" = 0 ]; then
	section "kubernetes: skipped (SANDBOXD_TEST_KUBERNETES=0)"
else
	section "kubernetes: build the binaries (scripts/k8s-build.sh, cached)"
	if ! scripts/k8s-build.sh 2>&1 | tee "$ARTIFACTS/k8s-build.log"; then
		echo "warning: Kubernetes cannot be built on this machine (see artifacts/k8s-build.log); the cluster suites are skipped." >&2
	else
		section "kubernetes: sandboxd's image (make images-sandboxd)"
		make images-sandboxd 2>&1 | tee "$ARTIFACTS/images-sandboxd.log"
		section "kubernetes: a single-node cluster (scripts/k8s-up.sh)"
		# Torn down on every exit, with the cluster's logs kept first.
		trap 'cp -r /var/lib/sandboxd-k8s/logs "$ARTIFACTS/k8s-logs" 2>/dev/null; scripts/k8s-down.sh >"$ARTIFACTS/k8s-down.log" 2>&1' EXIT
		scripts/k8s-up.sh 2>&1 | tee "$ARTIFACTS/k8s-up.log"
		# shellcheck disable=SC1091 # written by k8s-up.sh
		. /var/lib/sandboxd-k8s/env
		section "kubernetes: sandboxd as 3 replicas (scripts/cluster-deploy.sh, make cluster-deploy)"
		REPLICAS=3 scripts/cluster-deploy.sh deploy 2>&1 | tee "$ARTIFACTS/cluster-deploy.log"
		SANDBOXD_TEST_REPLICAS=$(tail -n 1 "$ARTIFACTS/cluster-deploy.log")
		export SANDBOXD_TEST_REPLICAS
		section "kubernetes: backend suite, leases, run records, chart install, replicas and e2e on the cluster (go test -race)"
		SANDBOXD_TEST_KUBERNETES=1 "$GO" test -race -count=1 -timeout "$TEST_TIMEOUT" -v \
			-run 'Cluster|Kubernetes|Chart|Deploy' ./sandbox/kubernetes/ ./cluster/... ./cmd/sandboxd-cluster/ ./e2e/ 2>&1 | tee "$ARTIFACTS/test-kubernetes.log"
		section "kubernetes: benchmarks, smoke (BENCH='kubernetes pools-kubernetes lifecycle-kubernetes replicas' BENCH_SMOKE=1 scripts/bench.sh)"
		GO=$GO BENCH='kubernetes pools-kubernetes lifecycle-kubernetes replicas' BENCH_SMOKE=1 BENCH_GOFLAGS=-race scripts/bench.sh 2>&1 | tee "$ARTIFACTS/bench-smoke-kubernetes.log"
	fi
fi

section "all tests passed in $((SECONDS - start))s (logs in artifacts/)"
