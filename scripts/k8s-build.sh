#!/usr/bin/env bash
# Builds the Kubernetes binaries a single-node test cluster needs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kubectl) from the Go module proxy
# and caches them under $K8S_CACHE/<version>/bin (default /var/cache/sandboxd-k8s/build,
# outside the checkout so every clean checkout on the machine reuses it). A cached binary
# is never rebuilt.
#
# `go install k8s.io/kubernetes/...@vX` is refused because k8s.io/kubernetes replaces
# its staging modules with local paths, so a throwaway module requires it and pins
# every staging module (v0.0.0 in its go.mod) to the matching v0.X.Y release.
# Builds run under `nice -n 19` so other work on the machine keeps the CPU.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE="${K8S_CACHE:-/var/cache/sandboxd-k8s/build}"
OUT="$CACHE/$K8S_VERSION/bin"
SRC="$CACHE/$K8S_VERSION/src"
GO="${GO:-go}"
export PATH="$PATH:/usr/local/go/bin"

mkdir -p "$OUT" "$SRC"

staging_version="v0.${K8S_VERSION#v1.}"

if [ ! -f "$SRC/go.mod" ]; then
	modfile="$("$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
	[ -f "$modfile" ] || { echo "k8s-build: cannot download k8s.io/kubernetes@$K8S_VERSION from the module proxy" >&2; exit 1; }
	{
		echo "module k8sbuild"
		echo
		sed -n 's/^go \(.*\)$/go \1/p' "$modfile"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		grep -E '^\s+k8s\.io/\S+ v0\.0\.0$' "$modfile" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
	} >"$SRC/go.mod.tmp"
	mv "$SRC/go.mod.tmp" "$SRC/go.mod"
	cat >"$SRC/tools.go" <<'GO'
//go:build tools

package k8sbuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
	(cd "$SRC" && GOFLAGS=-mod=mod "$GO" mod tidy -e >/dev/null 2>&1 || GOFLAGS=-mod=mod "$GO" get "k8s.io/kubernetes@$K8S_VERSION")
fi

# Stamp the version the way Kubernetes' own build does: clients (Helm's
# kubeVersion checks, kubectl version skew) read it from the API server.
minor="${K8S_VERSION#v1.}"
minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

for cmd in kube-apiserver kubelet kube-controller-manager kubectl kube-scheduler; do
	vflag=--version
	[ "$cmd" = kubectl ] && vflag="version --client"
	# shellcheck disable=SC2086 # vflag is one or two words
	if [ -x "$OUT/$cmd" ] && "$OUT/$cmd" $vflag 2>/dev/null | grep -q "$K8S_VERSION"; then
		continue
	fi
	start=$(date +%s)
	(cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 19 "$GO" build -trimpath -ldflags "$ldflags" -o "$OUT/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
	mv "$OUT/$cmd.tmp" "$OUT/$cmd"
	echo "k8s-build: $cmd built in $(( $(date +%s) - start )) s"
done
echo "$OUT"
