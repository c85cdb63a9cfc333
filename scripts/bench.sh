#!/usr/bin/env bash
# Runs the benchmarks and rewrites their sections of BENCHMARKS.md; each one
# measures sandboxd beside its peer in the same run (see BENCHMARKS.md for
# what each compares) and ends its section with the commit (git describe,
# taken once at the start) and the date.
#
#   scripts/bench.sh            every family whose setting is here (make bench)
#   BENCH='lsp eval' scripts/bench.sh   those families (a named family whose
#                               setting is missing is an error, not a skip)
#   BENCH_SMOKE=1 scripts/bench.sh      each once at minimal size, checking its
#                               section renders; BENCHMARKS.md is left alone
#                               (scripts/test.sh runs this)
#   BENCH_SKIP='kubernetes replicas'    leave those families out of the default set
#
# BENCH_FLAGS adds flags to the core benchmark (e.g. BENCH_FLAGS='--only read4k'); BENCH_GOFLAGS
# adds build flags to every go run and go test (scripts/test.sh: '-race -tags dart', the flags its
# tests were built with, so the smoke run reuses their build cache).
# Needs the built binaries and images (make build images) and a Docker engine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
out=$root/BENCHMARKS.md
k8s_env=/var/lib/sandboxd-k8s/env

# The families, in the order they run: name, what it needs, how it runs.
#   needs:  docker      a Docker engine (always checked)
#           containerd  also containerd's socket (the image is synced from Docker)
#           cluster     also $k8s_env (scripts/k8s-up.sh, make cluster-up)
#           replicas    also SANDBOXD_TEST_REPLICAS (make cluster-deploy's last line)
#   kind:   cmd PKG [FLAG]    go run PKG --out BENCHMARKS.md [--smoke] [FLAG] (core: and BENCH_FLAGS)
#           test PKG RUN      go test PKG -run RUN (SANDBOXD_BENCH_EVAL=1, SANDBOXD_BENCH_OUT, SANDBOXD_BENCH_SMOKE)
#           gobench PKG NAME  go test PKG -bench NAME -benchtime 1x (SANDBOXD_BENCH_WRITE, SANDBOXD_BENCH_SMOKE)
# A new family is one line here (and, where it needs a setting, a case in has_setting). A cmd
# family's command takes --out FILE and --smoke (minimal size; bench.Publish with smoke set checks
# its section without writing FILE); bench's TestEveryBenchmarkIsAFamily fails while a cmd/*bench
# is missing here or lacks --smoke.
families=(
	"core       docker     cmd ./cmd/sandboxd-bench"
	"eval       docker     test ./e2e/ ^TestEvalBenchmark$"
	"egress     docker     test ./e2e/ ^TestEgressBenchmark$"
	"previews   docker     test ./e2e/ ^TestPreviewBenchmark$"
	"audit      docker     test ./e2e/ ^TestAuditBenchmark$"
	"gvisor     docker     test ./e2e/ ^TestGVisorBenchmark$"
	"lsp        docker     cmd ./cmd/lspbench"
	"astgrep    docker     cmd ./cmd/astgrepbench"
	"debug      docker     gobench ./tools/debug/ BenchmarkDebug"
	"containerd containerd cmd ./cmd/containerdbench"
	"watch      docker     cmd ./cmd/watchbench"
	"pools      docker     cmd ./cmd/poolbench"
	"lifecycle  docker     cmd ./cmd/lifecyclebench"
	"e2b        docker     cmd ./cmd/e2bbench"
	"pools-kubernetes cluster cmd ./cmd/poolbench -backend=kubernetes"
	"kubernetes cluster    cmd ./cmd/kubebench"
	"lifecycle-kubernetes cluster cmd ./cmd/kubelifecyclebench"
	"replicas   replicas   cmd ./cmd/replicabench"
)

export SANDBOXD_BIN=$root/bin/sandboxd
export SANDBOXD_AGENT_BIN=$root/bin/sandbox-agent
export SANDBOXD_TEST_IMAGE=${SANDBOXD_TEST_IMAGE:-sandboxd-sandbox:latest}
export SANDBOXD_TEST_DOCKER=1
# One commit for every section of this run: the sections rewritten first
# would otherwise make the later ones "-dirty".
SANDBOXD_BENCH_COMMIT=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
export SANDBOXD_BENCH_COMMIT
smoke=${BENCH_SMOKE:-0}
if [ "$smoke" = 1 ]; then
	export SANDBOXD_BENCH_SMOKE=1
fi

# cluster_up: the test cluster's env file exists and its API server answers (a
# file left by a cluster since taken down is not a cluster).
cluster_up() {
	[ -f "$k8s_env" ] || return 1
	local kc
	kc=$(. "$k8s_env" && echo "${KUBECONFIG:-}")
	[ -n "$kc" ] && command -v kubectl >/dev/null 2>&1 || return 0
	timeout 10 kubectl --kubeconfig "$kc" get --raw /readyz >/dev/null 2>&1
}

# has_setting NEEDS: whether this machine has what a family needs beyond Docker.
has_setting() {
	case $1 in
	docker) return 0 ;;
	containerd) [ -S "${SANDBOXD_CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}" ] ;;
	cluster) cluster_up ;;
	replicas) cluster_up && [ -n "${SANDBOXD_TEST_REPLICAS:-}" ] ;;
	*) return 1 ;;
	esac
}

names=()
for f in "${families[@]}"; do
	read -r name _ <<<"$f"
	names+=("$name")
done
selected=${BENCH:-}

run_family() {
	local name=$1 needs=$2 kind=$3 pkg=$4 arg=${5:-}
	case $needs in
	cluster | replicas)
		# shellcheck disable=SC1090 # written by scripts/k8s-up.sh
		. "$k8s_env"
		;;
	esac
	local smokeflag=() goflags=()
	if [ "$smoke" = 1 ]; then smokeflag=(--smoke); fi
	if [ -n "${BENCH_GOFLAGS:-}" ]; then read -r -a goflags <<<"$BENCH_GOFLAGS"; fi
	case $kind in
	cmd)
		local extra=()
		if [ "$name" = core ] && [ -n "${BENCH_FLAGS:-}" ]; then read -r -a extra <<<"$BENCH_FLAGS"; fi
		if [ -n "$arg" ]; then extra+=("$arg"); fi
		"$GO" run "${goflags[@]}" "$pkg" --out "$out" "${smokeflag[@]}" "${extra[@]}"
		;;
	test) SANDBOXD_BENCH_EVAL=1 SANDBOXD_BENCH_OUT=$out "$GO" test "${goflags[@]}" -count=1 -run "$arg" -v "$pkg" ;;
	gobench) SANDBOXD_BENCH_WRITE=$out "$GO" test "${goflags[@]}" -count=1 -run '^$' -bench "$arg" -benchtime 1x "$pkg" ;;
	*)
		echo "bench.sh: family $name has kind $kind; use cmd, test or gobench" >&2
		return 2
		;;
	esac
}

if [ -n "$selected" ]; then
	for want in $selected; do
		found=0
		for n in "${names[@]}"; do [ "$n" = "$want" ] && found=1; done
		if [ "$found" = 0 ]; then
			echo "unknown benchmark family $want; use one or more of: ${names[*]}" >&2
			exit 2
		fi
	done
fi

ran=() skipped=()
for f in "${families[@]}"; do
	read -r name needs kind pkg arg <<<"$f"
	if [ -n "$selected" ] && [[ " $selected " != *" $name "* ]]; then
		continue
	fi
	if [ -z "$selected" ] && [[ " ${BENCH_SKIP:-} " == *" $name "* ]]; then
		continue
	fi
	if ! has_setting "$needs"; then
		if [ -n "$selected" ]; then
			echo "benchmark family $name needs $needs, which this machine lacks (cluster: make cluster-up; replicas: make cluster-deploy and SANDBOXD_TEST_REPLICAS; containerd: a running containerd)" >&2
			exit 2
		fi
		skipped+=("$name ($needs)")
		continue
	fi
	if [ "$name" = astgrep ]; then scripts/install-ast-grep.sh >/dev/null; fi
	printf '\n==== bench: %s%s (commit %s) ====\n' "$name" "$([ "$smoke" = 1 ] && echo ', smoke')" "$SANDBOXD_BENCH_COMMIT"
	t0=$SECONDS
	run_family "$name" "$needs" "$kind" "$pkg" "$arg"
	ran+=("$name $((SECONDS - t0))s")
done
printf '\n==== bench: ran %s' "${ran[*]:-nothing}"
if ((${#skipped[@]})); then printf '; skipped, setting missing: %s' "${skipped[*]}"; fi
printf ' ====\n'
