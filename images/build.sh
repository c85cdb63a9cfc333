#!/usr/bin/env bash
# Builds the default sandbox image (sandboxd-sandbox:latest) from images/sandbox/Dockerfile.
#
# Works with no container registry: when BASE is neither present nor pullable, the Debian 12 base
# is made with debootstrap and `docker import`. gopls, dlv and a copy of the Go toolchain come from
# the build host (cached under images/.cache/); the npm language servers install during the build.
#
# Cached: the image is labelled with a hash of everything that goes into it, and a run whose hash
# matches the existing image's label does nothing. Set FORCE=1 to rebuild anyway.
#
# Environment (all optional):
#   IMAGE          image to build                      (sandboxd-sandbox:latest)
#   BASE           base image                          (debian:bookworm-slim)
#   FALLBACK_BASE  name of the debootstrap-made base   (sandboxd-base:bookworm)
#   DEBIAN_MIRROR  mirror for debootstrap              (http://deb.debian.org/debian)
#   EXTRA_CA_DIR   folder of extra CA *.crt files baked into the image, for networks behind a
#                  TLS-inspecting proxy; empty to add none  (/usr/local/share/ca-certificates)
#   PULL_TIMEOUT   seconds to try pulling BASE         (15)
#   GO             go command                          (go on PATH, else /usr/local/go/bin/go)
#   FORCE          1 rebuilds even when the image is up to date
#
# `images/build.sh base` only makes sure a base image exists (making it if need be) and prints it.
# `images/build.sh sandboxd` builds sandboxd:latest (SANDBOXD_IMAGE) from images/sandboxd/Dockerfile
# and the host-built bin/sandboxd and bin/sandbox-agent (`make build` first).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMAGE=${IMAGE:-sandboxd-sandbox:latest}
DEFAULT_BASE=debian:bookworm-slim
BASE=${BASE:-$DEFAULT_BASE}
FALLBACK_BASE=${FALLBACK_BASE:-sandboxd-base:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
EXTRA_CA_DIR=${EXTRA_CA_DIR-/usr/local/share/ca-certificates}
PULL_TIMEOUT=${PULL_TIMEOUT:-15}
FORCE=${FORCE:-0}
CACHE=$here/.cache
LABEL=io.sandboxd.inputs

case ${1:-} in
"") only_base=0 ;;
base) only_base=1 ;;
sandboxd) only_base=0 ;;
*)
	echo "[images] error: unknown argument $1; run images/build.sh with no argument, with base to make only the base image, or with sandboxd for sandboxd:latest." >&2
	exit 2
	;;
esac

log() { printf '[images %3ds] %s\n' "$SECONDS" "$*" >&2; }
die() {
	printf '[images] error: %s\n' "$*" >&2
	exit 1
}

# --- preconditions -------------------------------------------------------------------------------

command -v docker >/dev/null || die "the docker command is missing; run scripts/setup.sh (as root) to install Docker."
timeout 30 docker info >/dev/null 2>&1 ||
	die "no Docker engine answers; start one (scripts/setup.sh does) and run make images again."

if [[ -z ${GO:-} ]]; then
	if command -v go >/dev/null; then GO=go; else GO=/usr/local/go/bin/go; fi
fi
"$GO" version >/dev/null 2>&1 || die "no Go toolchain found (tried $GO); install Go 1.26 or set GO=/path/to/go."

# shellcheck source=images/versions.env
source "$here/versions.env"

# --- base image ----------------------------------------------------------------------------------

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# make_fallback_base builds a minimal Debian 12 root file system with debootstrap and imports it.
make_fallback_base() {
	command -v debootstrap >/dev/null ||
		die "$BASE cannot be pulled and debootstrap is missing; run scripts/setup.sh (as root) or apt-get install debootstrap."
	[[ $(id -u) == 0 ]] || die "$BASE cannot be pulled and making a base with debootstrap needs root; run make images as root."
	local dir
	dir=$(mktemp -d /var/tmp/sandboxd-base.XXXXXX)
	# The trap owns the root file system: it goes away however this function ends.
	# shellcheck disable=SC2064 # expand now: $dir is local to this function
	trap "rm -rf '$dir'" EXIT
	log "debootstrap bookworm from $DEBIAN_MIRROR (about 30 s)"
	debootstrap --variant=minbase bookworm "$dir" "$DEBIAN_MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $CACHE/debootstrap.log."
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
	log "docker import -> $FALLBACK_BASE"
	tar -C "$dir" -c . | docker import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]' \
		--message "debootstrap --variant=minbase bookworm $DEBIAN_MIRROR" \
		- "$FALLBACK_BASE" >/dev/null
	rm -rf "$dir"
	trap - EXIT
}

# resolve_base prints the base image to build from.
resolve_base() {
	if have_image "$BASE"; then
		log "base: $BASE (local)"
	elif log "base: trying docker pull $BASE (at most ${PULL_TIMEOUT}s)" &&
		timeout "$PULL_TIMEOUT" docker pull -q "$BASE" >/dev/null 2>&1; then
		log "base: $BASE (pulled)"
	elif [[ $BASE != "$DEFAULT_BASE" ]]; then
		die "base image $BASE is not local and cannot be pulled; pull or build it, or unset BASE to use Debian 12."
	elif have_image "$FALLBACK_BASE"; then
		log "base: $FALLBACK_BASE (no registry; debootstrap-made base already present)"
		BASE=$FALLBACK_BASE
	else
		log "base: no registry; making $FALLBACK_BASE"
		make_fallback_base
		BASE=$FALLBACK_BASE
	fi
}

mkdir -p "$CACHE"
resolve_base
if [[ $only_base == 1 ]]; then
	echo "$BASE"
	exit 0
fi
if [[ ${1:-} == sandboxd ]]; then
	# shellcheck source=images/sandboxd/build.sh
	source "$here/sandboxd/build.sh"
	exit 0
fi

# --- inputs hash ---------------------------------------------------------------------------------

extra_ca_files() {
	[[ -n $EXTRA_CA_DIR && -d $EXTRA_CA_DIR ]] || return 0
	find "$EXTRA_CA_DIR" -type f -name '*.crt' | LC_ALL=C sort
}

go_version=$("$GO" env GOVERSION)
goroot=$("$GO" env GOROOT)
inputs_hash=$(
	{
		echo "base=$(docker image inspect -f '{{.Id}}' "$BASE")"
		echo "go=$go_version $("$GO" env GOOS GOARCH | tr '\n' ' ')"
		cat "$here/sandbox/Dockerfile" "$here/versions.env" "$here/build.sh"
		extra_ca_files | while read -r f; do sha256sum <"$f"; done
	} | sha256sum | cut -c1-32
)

current=$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$IMAGE" 2>/dev/null || true)
if [[ $current == "$inputs_hash" && $FORCE != 1 ]]; then
	log "$IMAGE is up to date (inputs $inputs_hash); FORCE=1 rebuilds it"
	exit 0
fi
log "building $IMAGE (inputs $inputs_hash${current:+, image has $current})"

# --- host-built artifacts (cached) ---------------------------------------------------------------

# gopls and dlv: static (CGO_ENABLED=0) so they run whatever the image's libc.
gobin=$CACHE/gobin/$go_version-gopls-$GOPLS_VERSION-dlv-$DLV_VERSION
if [[ ! -x $gobin/gopls || ! -x $gobin/dlv ]]; then
	log "go install gopls@$GOPLS_VERSION and dlv@$DLV_VERSION with $go_version (a few minutes the first time)"
	tmp=$gobin.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	GOBIN=$tmp CGO_ENABLED=0 GOFLAGS=-trimpath "$GO" install "golang.org/x/tools/gopls@$GOPLS_VERSION"
	GOBIN=$tmp CGO_ENABLED=0 GOFLAGS=-trimpath "$GO" install "github.com/go-delve/delve/cmd/dlv@$DLV_VERSION"
	rm -rf "$gobin"
	mv "$tmp" "$gobin"
else
	log "gopls and dlv: cached in ${gobin#"$here"/}"
fi

# The Go toolchain, without its own compiler regression suite (test/), as one tar that ADD unpacks.
gotar=$CACHE/go/$go_version-$("$GO" env GOOS)-$("$GO" env GOARCH).tar
if [[ ! -s $gotar ]]; then
	log "packing the Go toolchain from $goroot"
	mkdir -p "$(dirname "$gotar")"
	tar -C "$goroot" --exclude=./test --transform 's,^\.,go,' -cf "$gotar.tmp" .
	mv "$gotar.tmp" "$gotar"
else
	log "Go toolchain: cached in ${gotar#"$here"/}"
fi

# --- build context -------------------------------------------------------------------------------

ctx=$CACHE/context
rm -rf "$ctx"
mkdir -p "$ctx/extra-ca" "$ctx/gobin"
# Hard links: the context lives on the cache's file system, so staging costs no copy.
link() { ln -f "$1" "$2" 2>/dev/null || cp -p "$1" "$2"; }
link "$gotar" "$ctx/go.tar"
link "$gobin/gopls" "$ctx/gobin/gopls"
link "$gobin/dlv" "$ctx/gobin/dlv"
n_ca=0
while read -r f; do
	[[ -n $f ]] || continue
	n_ca=$((n_ca + 1))
	cp "$f" "$ctx/extra-ca/extra-$n_ca-$(basename "$f")"
done < <(extra_ca_files)
log "build context staged: Go $go_version, gopls, dlv, $n_ca extra CA file(s)"

build_args=(
	--build-arg "BASE=$BASE"
	--build-arg "PYRIGHT_VERSION=$PYRIGHT_VERSION"
	--build-arg "TSLS_VERSION=$TSLS_VERSION"
	--build-arg "TYPESCRIPT_VERSION=$TYPESCRIPT_VERSION"
)
# Docker passes these predefined proxy arguments through without a matching ARG.
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	[[ -n ${!v:-} ]] && build_args+=(--build-arg "$v=${!v}")
done

# Build under a candidate tag and move IMAGE only once the candidate passes verify.sh, so a broken
# build never replaces a working image.
candidate=${IMAGE%:*}:candidate-$inputs_hash
log "docker build -> $candidate"
docker build "${build_args[@]}" \
	--label "$LABEL=$inputs_hash" \
	--label "org.opencontainers.image.title=sandboxd sandbox" \
	--label "io.sandboxd.go=$go_version" \
	--label "io.sandboxd.gopls=$GOPLS_VERSION" \
	--label "io.sandboxd.dlv=$DLV_VERSION" \
	--label "io.sandboxd.pyright=$PYRIGHT_VERSION" \
	--label "io.sandboxd.typescript-language-server=$TSLS_VERSION" \
	--label "io.sandboxd.typescript=$TYPESCRIPT_VERSION" \
	-f "$here/sandbox/Dockerfile" -t "$candidate" "$ctx"
rm -rf "$ctx"

log "verifying $candidate"
if ! "$here/verify.sh" "$candidate"; then
	die "the built image failed its checks (above); $IMAGE was left as it was, the candidate is $candidate."
fi
previous=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
docker tag "$candidate" "$IMAGE"
docker rmi "$candidate" >/dev/null
# The image this one replaces goes too, unless another tag or a sandbox still uses it (rmi refuses).
if [[ -n $previous && $previous != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]]; then
	if docker rmi "$previous" >/dev/null 2>&1; then log "removed the previous image ${previous:7:12}"; fi
fi
log "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')) in ${SECONDS}s"
