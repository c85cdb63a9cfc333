# shellcheck shell=bash
# Sourced by images/build.sh sandboxd once BASE is resolved: builds
# sandboxd:latest from images/sandboxd/Dockerfile and the host-built binaries
# (bin/sandboxd, bin/sandbox-agent from `make build`). Cached like the
# sandbox image: a run whose inputs hash matches the image's label does
# nothing (FORCE=1 rebuilds).
#
#   SANDBOXD_IMAGE  image to build  (sandboxd:latest)
#   BIN_DIR         where the binaries are  (<repo>/bin)
#   SANDBOXD_FROM   host (default): pack the host-built binaries; source:
#                   build them in a multi-stage build (Dockerfile.source)
#                   from GO_IMAGE, for machines that can pull one
#   GO_IMAGE        the builder of SANDBOXD_FROM=source (golang:1.26-bookworm;
#                   it needs gcc, as tree-sitter is cgo)

SANDBOXD_IMAGE=${SANDBOXD_IMAGE:-sandboxd:latest}
BIN_DIR=${BIN_DIR:-$(cd "$here/.." && pwd)/bin}
SANDBOXD_FROM=${SANDBOXD_FROM:-host}
GO_IMAGE=${GO_IMAGE:-golang:1.26-bookworm}

if [[ $SANDBOXD_FROM == source ]]; then
	repo=$(cd "$here/.." && pwd)
	if ! docker image inspect "$GO_IMAGE" >/dev/null 2>&1; then
		log "pulling $GO_IMAGE (at most ${PULL_TIMEOUT}s)"
		timeout "$PULL_TIMEOUT" docker pull -q "$GO_IMAGE" >/dev/null 2>&1 ||
			die "$GO_IMAGE cannot be pulled here; build from the host's binaries instead (make build, then images/build.sh sandboxd without SANDBOXD_FROM), or set GO_IMAGE to a local image with Go and gcc."
	fi
	log "building $SANDBOXD_IMAGE from source in $GO_IMAGE"
	docker build --build-arg "GO_IMAGE=$GO_IMAGE" --build-arg "BASE=$BASE" \
		--build-arg "VERSION=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo dev)" \
		--label "org.opencontainers.image.title=sandboxd" \
		-f "$here/sandboxd/Dockerfile.source" -t "$SANDBOXD_IMAGE" "$repo"
	docker run --rm --network none --entrypoint /usr/local/bin/sandbox-agent "$SANDBOXD_IMAGE" version >/dev/null ||
		die "$SANDBOXD_IMAGE was built but its sandbox-agent does not run."
	log "built $SANDBOXD_IMAGE from source in ${SECONDS}s"
	return 0
fi
[[ $SANDBOXD_FROM == host ]] || die "SANDBOXD_FROM is $SANDBOXD_FROM; use host (the binaries of make build) or source (a multi-stage build from GO_IMAGE)."

for b in sandboxd sandbox-agent; do
	[[ -x $BIN_DIR/$b ]] || die "$BIN_DIR/$b is missing; run make build first."
done

sd_hash=$(
	{
		echo "base=$(docker image inspect -f '{{.Id}}' "$BASE")"
		cat "$here/sandboxd/Dockerfile" "$here/sandboxd/build.sh"
		sha256sum <"$BIN_DIR/sandboxd"
		sha256sum <"$BIN_DIR/sandbox-agent"
	} | sha256sum | cut -c1-32
)
current=$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$SANDBOXD_IMAGE" 2>/dev/null || true)
if [[ $current == "$sd_hash" && $FORCE != 1 ]]; then
	log "$SANDBOXD_IMAGE is up to date (inputs $sd_hash); FORCE=1 rebuilds it"
	return 0
fi
log "building $SANDBOXD_IMAGE (inputs $sd_hash${current:+, image has $current})"

sd_ctx=$CACHE/sandboxd-context
rm -rf "$sd_ctx"
mkdir -p "$sd_ctx"
cp -p "$BIN_DIR/sandboxd" "$BIN_DIR/sandbox-agent" "$sd_ctx/"
previous=$(docker image inspect -f '{{.Id}}' "$SANDBOXD_IMAGE" 2>/dev/null || true)
docker build --build-arg "BASE=$BASE" \
	--label "$LABEL=$sd_hash" \
	--label "org.opencontainers.image.title=sandboxd" \
	--label "io.sandboxd.version=$("$BIN_DIR/sandboxd" version | awk '{print $2}')" \
	-f "$here/sandboxd/Dockerfile" -t "$SANDBOXD_IMAGE" "$sd_ctx"
rm -rf "$sd_ctx"

# What the Kubernetes backend's init container runs, as the image's user.
docker run --rm --network none --entrypoint /usr/local/bin/sandbox-agent "$SANDBOXD_IMAGE" version >/dev/null ||
	die "$SANDBOXD_IMAGE was built but its sandbox-agent does not run."
docker run --rm --network none "$SANDBOXD_IMAGE" version >/dev/null ||
	die "$SANDBOXD_IMAGE was built but its sandboxd does not run."
if [[ -n $previous && $previous != "$(docker image inspect -f '{{.Id}}' "$SANDBOXD_IMAGE")" ]]; then
	if docker rmi "$previous" >/dev/null 2>&1; then log "removed the previous image ${previous:7:12}"; fi
fi
log "built $SANDBOXD_IMAGE ($(docker image inspect -f '{{.Size}}' "$SANDBOXD_IMAGE" | awk '{printf "%.0f MB", $1/1e6}')) in ${SECONDS}s"
