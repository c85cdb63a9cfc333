#!/usr/bin/env bash
# Runs the benchmarks and rewrites their sections of BENCHMARKS.md; each one
# measures sandboxd beside its peer in the same run (see BENCHMARKS.md for
# what each compares). BENCH selects families (default: all of them):
#   core    sandbox create, 4 KiB read next to docker exec, 200 idle sandboxes
#   eval    a trivial cell and kernel cold start
#   lsp     warm definition next to gopls over its own pipe
#   astgrep the engine next to the ast-grep CLI on GOROOT/src
#   debug   launch to the first breakpoint and stack, next to the bare adapters
#   kubernetes  create and pipe on a real cluster next to Docker and a fresh API
#           exec (not in the default set: needs `make cluster-up` and its env)
# Needs the built binaries and images (make build images) and a Docker engine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
BENCH=${BENCH:-core eval lsp astgrep debug}
out=$root/BENCHMARKS.md

export SANDBOXD_BIN=$root/bin/sandboxd
export SANDBOXD_AGENT_BIN=$root/bin/sandbox-agent
export SANDBOXD_TEST_IMAGE=${SANDBOXD_TEST_IMAGE:-sandboxd-sandbox:latest}
export SANDBOXD_TEST_DOCKER=1

for family in $BENCH; do
	printf '\n==== bench: %s ====\n' "$family"
	case $family in
	core) SANDBOXD_BENCH_OUT=$out "$GO" run ./cmd/sandboxd-bench ${BENCH_FLAGS:-} ;;
	eval) SANDBOXD_BENCH_EVAL=1 SANDBOXD_BENCH_OUT=$out "$GO" test -count=1 -run '^TestEvalBenchmark$' -v ./e2e/ ;;
	lsp) "$GO" run ./tools/lsp/lspbench --out "$out" ;;
	astgrep)
		scripts/install-ast-grep.sh >/dev/null
		"$GO" run ./tools/astgrep/bench --out "$out"
		;;
	debug) SANDBOXD_BENCH_WRITE=$out "$GO" test -count=1 -run '^$' -bench BenchmarkDebug -benchtime 1x ./tools/debug/ ;;
	kubernetes)
		# shellcheck disable=SC1091
		. /var/lib/sandboxd-k8s/env
		"$GO" run ./cmd/kubebench -out "$out"
		;;
	*)
		echo "unknown benchmark family $family; use core, eval, lsp, astgrep, debug or kubernetes" >&2
		exit 2
		;;
	esac
done
