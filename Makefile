# sandboxd — build, images, run, test. `make help` lists the targets.

GO ?= go
# Debian's root shells often lack Go on PATH; the official install lives here.
export PATH := $(PATH):/usr/local/go/bin

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# The Dart grammar (npm tree-sitter-dart, fetched and verified into .cache/ by
# scripts/fetch-dart-grammar.sh) is compiled into bin/sandboxd under the build
# tag `dart`; DART=0 builds without it (ast_grep then says Dart is not built).
DART ?= 1
ifeq ($(DART),1)
GOTAGS ?= dart
endif

LISTEN ?= 127.0.0.1:7788
DATA_DIR ?= ./.data
# auto: docker when an engine answers, else host.
BACKEND ?= auto
CONFIG ?=

.PHONY: help build images images-sandboxd images-verify run test lint bench cluster-up cluster-deploy cluster-down kind-e2e clean clean-cache

help:
	@echo 'make build          bin/sandboxd (with the Dart grammar and the console xterm.js, fetched from npm; DART=0 without Dart) and bin/sandbox-agent (static)'
	@echo 'make images         the sandbox image sandboxd-sandbox:latest (cached; FORCE=1 rebuilds)'
	@echo 'make images-verify  check the tools inside sandboxd-sandbox:latest'
	@echo 'make images-sandboxd  sandboxd:latest (sandboxd + sandbox-agent, for Kubernetes; cached)'
	@echo 'make run            build and serve on $(LISTEN) (BACKEND=auto|docker|host, DATA_DIR, CONFIG); prints the console URL and token once it answers'
	@echo 'make test           everything CI runs: set-up, build, images, lint, unit, integration, e2e'
	@echo 'make lint           gofmt, go vet, staticcheck (pinned, installed into .tools/ on first use) and the layering check'
	@echo 'make cluster-up     a local single-node Kubernetes for tests (prints the KUBECONFIG path last)'
	@echo 'make cluster-deploy sandboxd as REPLICAS replicas there (default 3; prints {"urls","token",...} last)'
	@echo 'make cluster-down   remove that release and tear the cluster down, leaving nothing running'
	@echo 'make kind-e2e       the cluster suites on a kind cluster (where kind can pull its node image)'
	@echo 'make bench          every benchmark family (BENCH= picks), each section rewritten in BENCHMARKS.md and stamped with the commit'
	@echo '                    (containerd always; kubernetes/replicas when a cluster is up; BENCH_SMOKE=1 checks them at minimal size instead)'
	@echo 'make clean          remove bin/ and artifacts/; make clean-cache also drops images/.cache/ and .cache/'

# Always handed to go build: its own cache decides what is stale. The console's terminal
# emulator (npm xterm.js, pinned and verified) is vendored into api/ui/vendor/ first, where
# go:embed takes it; a go build without it serves a console whose terminal says to run make build.
build:
	@mkdir -p bin
	@scripts/vendor-xterm.sh >/dev/null
ifeq ($(DART),1)
	@scripts/fetch-dart-grammar.sh >/dev/null
endif
	$(GO) build -trimpath -tags '$(GOTAGS)' -ldflags '-s -w $(LDFLAGS)' -o bin/sandboxd ./cmd/sandboxd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o bin/sandbox-agent ./cmd/sandbox-agent

images:
	GO=$(GO) images/build.sh

images-sandboxd: build
	GO=$(GO) images/build.sh sandboxd

images-verify:
	images/verify.sh sandboxd-sandbox:latest

run: build
	LISTEN='$(LISTEN)' DATA_DIR='$(DATA_DIR)' BACKEND='$(BACKEND)' CONFIG='$(CONFIG)' scripts/run.sh

test:
	scripts/test.sh

lint:
	scripts/lint.sh

# Every family's benchmark (scripts/bench.sh lists them, one line each; BENCH='core eval' selects);
# each measures sandboxd beside its peer in the same run and rewrites its own section of
# BENCHMARKS.md, ending it with the commit (git describe, once per run) and the date. containerd
# runs where its socket is; kubernetes and replicas where a cluster is up (make cluster-up,
# cluster-deploy). BENCH_SMOKE=1 runs each once at minimal size without rewriting the file (what
# make test does). BENCH_FLAGS adds flags to the core benchmark (e.g. BENCH_FLAGS='--only read4k').
BENCH ?=
BENCH_SMOKE ?=
BENCH_FLAGS ?=
bench: build images
	GO=$(GO) BENCH='$(BENCH)' BENCH_SMOKE='$(BENCH_SMOKE)' BENCH_FLAGS='$(BENCH_FLAGS)' scripts/bench.sh

# A real single-node Kubernetes 1.37 built from the module proxy (binaries cached in /var/cache/sandboxd-k8s);
# the Kubernetes backend's tests run against it with SANDBOXD_TEST_KUBERNETES=1 and its KUBECONFIG.
cluster-up: build images images-sandboxd
	scripts/k8s-up.sh

# sandboxd's chart as $(REPLICAS) replicas on that cluster (namespace $(DEPLOY_NAMESPACE), hostNetwork, replica i
# on http://127.0.0.1:27800+i, tenant e2e with a fresh token), installed with the Helm SDK by cmd/sandboxd-cluster;
# waits until every replica is Ready and prints one JSON line last. Running it again upgrades (fresh token,
# every replica restarted on the current image). DEPLOY_FLAGS adds flags (e.g. '--timeout 8m').
REPLICAS ?= 3
DEPLOY_NAMESPACE ?= sandboxd-replicas
DEPLOY_FLAGS ?=
cluster-deploy: cluster-up
	@GO=$(GO) REPLICAS='$(REPLICAS)' NAMESPACE='$(DEPLOY_NAMESPACE)' DEPLOY_FLAGS='$(DEPLOY_FLAGS)' scripts/cluster-deploy.sh deploy

# The release first (nothing to do when no cluster is up; a failure does not stop the teardown).
cluster-down:
	-@GO=$(GO) NAMESPACE='$(DEPLOY_NAMESPACE)' scripts/cluster-deploy.sh undeploy
	scripts/k8s-down.sh

# The same cluster suites on kind, where kind can pull its node image (not on machines without a registry).
kind-e2e:
	GO=$(GO) scripts/kind-e2e.sh

clean:
	rm -rf bin artifacts

clean-cache:
	rm -rf images/.cache .cache
