#!/usr/bin/env bash
# Brings up a single-node Kubernetes cluster on this machine for tests:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, a
# PRIVATE containerd (own root, state and socket; Docker's is untouched), a
# bridge CNI network, a locally built pause image, and a default
# StorageClass whose claims the controller-manager's own hostPath
# provisioner fills (a directory under /tmp/hostpath_pv per volume, deleted
# with its claim; one node only, which this is). Nothing is pulled.
# Every listener is on 127.0.0.1; the API server reaches the kubelet at
# localhost (the node's name). Idempotent: a cluster that is already up
# is reused. The last line printed is the KUBECONFIG path.
#
#   scripts/k8s-up.sh            # build (cached) and start
#   scripts/k8s-down.sh          # stop and remove everything but the caches
#
# Needs root, Debian's etcd-server, containerd, runc, containernetworking-
# plugins, openssl and a Docker engine holding the images to import.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${K8S_CACHE:-/var/cache/sandboxd-k8s/build}"
RUN="${K8S_RUN_DIR:-/var/lib/sandboxd-k8s}"
# The private containerd's root outlives a teardown, so imported images are
# reused; it is kept out of the repository (gigabytes of image layers).
IMAGE_CACHE="${K8S_IMAGE_CACHE:-/var/cache/sandboxd-k8s/containerd}"
BIN="$CACHE/$K8S_VERSION/bin"
# The node is named localhost: its Hostname address is then how the API
# server reaches the kubelet, and it resolves to 127.0.0.1, so that traffic
# stays on loopback (the kubelet rewrites the Node's addresses, an ExternalIP
# patch does not last, and it refuses a loopback node IP).
NODE="${K8S_NODE_NAME:-localhost}"
API_PORT="${K8S_API_PORT:-16443}"
ETCD_PORT=23790
KUBELET_PORT=20250
BRIDGE=sbxk8s0
POD_CIDR=10.244.77.0/24
SERVICE_CIDR=10.96.77.0/24
PAUSE_IMAGE=sandboxd.local/pause:1
IMAGES="${K8S_IMAGES:-sandboxd-sandbox:latest sandboxd:latest}"
STORAGE_CLASS=sandboxd-hostpath
KUBECONFIG_OUT="$RUN/admin.kubeconfig"
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

log() { echo "k8s-up: $*" >&2; }
die() { echo "k8s-up: $*" >&2; exit 1; }
t0=$(date +%s)

[ "$(id -u)" = 0 ] || die "run as root: the kubelet and containerd need it"
# Debian packages the cluster needs and a fresh machine lacks (K8S_NO_INSTALL=1 to only check).
if { ! command -v etcd >/dev/null || [ ! -x /usr/lib/cni/bridge ]; } && [ "${K8S_NO_INSTALL:-0}" != 1 ] && command -v apt-get >/dev/null; then
	log "installing etcd-server and containernetworking-plugins"
	DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server containernetworking-plugins >&2 ||
		{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server containernetworking-plugins >&2; }
fi
for cmd in etcd containerd runc openssl ctr docker; do
	command -v "$cmd" >/dev/null || die "$cmd is missing; install it (apt-get install -y etcd-server docker.io containernetworking-plugins openssl)"
done
[ -x /usr/lib/cni/bridge ] || die "/usr/lib/cni/bridge is missing; apt-get install -y containernetworking-plugins"

kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }
CTRD_SOCK="$RUN/containerd/containerd.sock"

# import_images puts every image of $IMAGES that Docker holds into the
# cluster's containerd, skipping those already imported from the same build.
import_images() {
	local img id mark
	for img in $IMAGES; do
		docker image inspect "$img" >/dev/null 2>&1 || { log "image $img is not in Docker; skipped"; continue; }
		id=$(docker image inspect -f '{{.Id}}' "$img")
		mark="$IMAGE_CACHE/.imported-$(echo "$img" | tr '/:' '__')"
		if [ "$(cat "$mark" 2>/dev/null)" = "$id" ] && ctr -n k8s.io -a "$CTRD_SOCK" images ls -q | grep -q "$img\$"; then
			continue
		fi
		log "importing $img into the cluster's containerd"
		docker save "$img" | ctr -n k8s.io -a "$CTRD_SOCK" images import - >/dev/null
		echo "$id" >"$mark"
	done
}

# storage_class makes the default StorageClass, provisioned by the
# controller-manager (--enable-hostpath-provisioner): the volumes are
# directories of this machine, deleted with their claims.
storage_class() {
	kc apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
YAML
}

if [ -f "$KUBECONFIG_OUT" ] && [ -x "$BIN/kubectl" ] && kc get --raw /readyz >/dev/null 2>&1; then
	log "the cluster is already up; bringing its images up to date"
	import_images
	if ! tr '\0' ' ' <"/proc/$(cat "$RUN/pids/kube-controller-manager" 2>/dev/null)/cmdline" 2>/dev/null | grep -q -- --enable-hostpath-provisioner; then
		die "this cluster was brought up without a volume provisioner (an older k8s-up.sh); once nothing uses it, run scripts/k8s-down.sh and then this again"
	fi
	storage_class
	grep -q SANDBOXD_TEST_K8S_STORAGE_CLASS "$RUN/env" 2>/dev/null || echo "export SANDBOXD_TEST_K8S_STORAGE_CLASS=$STORAGE_CLASS" >>"$RUN/env"
	echo "$KUBECONFIG_OUT"
	exit 0
fi

# What a cluster that did not come down left behind (its processes gone, its
# run dir, mounts and bridge still there) would confuse this one: clear it.
if [ -d "$RUN" ]; then
	log "clearing what an earlier cluster left in $RUN"
	"$ROOT/scripts/k8s-down.sh" >&2
fi

"$ROOT/scripts/k8s-build.sh" >&2
tb=$(date +%s)

NODE_IP="${K8S_NODE_IP:-$(hostname -I | awk '{print $1}')}"
[ -n "$NODE_IP" ] || die "cannot tell this machine's address; set K8S_NODE_IP"

mkdir -p "$RUN"/{pki,etcd,logs,pids,kubelet,cni/net.d,cni/ipam,cni/cache,containerd/state} "$IMAGE_CACHE"

# ---- certificates --------------------------------------------------------
PKI="$RUN/pki"
cert() { # name CN O [SANs]
	local name=$1 cn=$2 o=$3 san=${4:-}
	[ -f "$PKI/$name.crt" ] && return
	openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
	local subj="/CN=$cn"
	[ -n "$o" ] && subj="/O=$o/CN=$cn"
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=serverAuth,clientAuth"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} >"$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 365 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
}
if [ ! -f "$PKI/ca.crt" ]; then
	openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
	openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=sandboxd-test-ca" -days 365 -sha256 -out "$PKI/ca.crt" 2>/dev/null
fi
FIRST_SVC_IP=10.96.77.1
cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$NODE_IP,IP:$FIRST_SVC_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert admin admin system:masters
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert kubelet-client "system:node:$NODE" system:nodes
cert kubelet-serving "$NODE" "" "IP:127.0.0.1,IP:$NODE_IP,DNS:$NODE,DNS:localhost"
[ -f "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }

kubeconfig() { # file user cert
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sandboxd-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$3.crt")
    client-key-data: $(base64 -w0 "$PKI/$3.key")
contexts:
- name: sandboxd-test
  context: {cluster: sandboxd-test, user: $2, namespace: default}
current-context: sandboxd-test
KC
	chmod 600 "$1"
}
kubeconfig "$RUN/admin.kubeconfig" admin admin
kubeconfig "$RUN/controller-manager.kubeconfig" controller-manager controller-manager
kubeconfig "$RUN/scheduler.kubeconfig" scheduler scheduler
kubeconfig "$RUN/kubelet.kubeconfig" "system:node:$NODE" kubelet-client

# start NAME CMD... runs CMD in the background, logs in logs/NAME.log.
start() {
	local name=$1
	shift
	if [ -f "$RUN/pids/$name" ] && kill -0 "$(cat "$RUN/pids/$name")" 2>/dev/null; then
		return
	fi
	"$@" >"$RUN/logs/$name.log" 2>&1 &
	echo $! >"$RUN/pids/$name"
}
# wait_for WHAT SECONDS CMD... polls CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || die "$what did not come up within ${secs}s; see $RUN/logs/"
		sleep 0.3
	done
}

# ---- containerd (private) ------------------------------------------------
cat >"$RUN/containerd/config.toml" <<TOML
version = 2
root = "$IMAGE_CACHE"
state = "$RUN/containerd/state"
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
TOML
start containerd containerd --config "$RUN/containerd/config.toml"
wait_for containerd 30 ctr -a "$CTRD_SOCK" version

cat >"$RUN/cni/net.d/10-sandboxd.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "sandboxd-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$RUN/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    }
  ]
}
JSON

# ---- images: pause (built here) and the test images from Docker ----------
imported() { ctr -n k8s.io -a "$CTRD_SOCK" images ls -q | grep -qx "$1"; }
if ! imported "$PAUSE_IMAGE"; then
	if ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
		ctx="$CACHE/pause"
		mkdir -p "$ctx"
		cat >"$ctx/main.go" <<'GO'
// pause holds a pod's namespaces: it sleeps, reaps orphans and exits on
// SIGTERM or SIGINT.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
GO
		(cd "$ctx" && [ -f go.mod ] || (cd "$ctx" && go mod init pause >/dev/null 2>&1))
		(cd "$ctx" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o pause .)
		printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
		docker build -q -t "$PAUSE_IMAGE" "$ctx" >/dev/null
	fi
	docker save "$PAUSE_IMAGE" | ctr -n k8s.io -a "$CTRD_SOCK" images import - >/dev/null
fi
# A test agent image when sandboxd's own image is not built yet: the base
# image with the agent at the path sandboxd's image keeps it.
if ! docker image inspect sandboxd:latest >/dev/null 2>&1 && docker image inspect sandboxd-base:bookworm >/dev/null 2>&1; then
	ctx="$CACHE/agent-image"
	mkdir -p "$ctx"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/sandbox-agent" ./cmd/sandbox-agent)
	printf 'FROM sandboxd-base:bookworm\nCOPY sandbox-agent /usr/local/bin/sandbox-agent\n' >"$ctx/Dockerfile"
	docker build -q -t sandboxd-k8s-agent:dev "$ctx" >/dev/null
	IMAGES="$IMAGES sandboxd-k8s-agent:dev"
fi
import_images
ti=$(date +%s)

# ---- etcd and the control plane ------------------------------------------
start etcd etcd --name sandboxd-test --data-dir "$RUN/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
	--initial-cluster sandboxd-test=http://127.0.0.1:23800
wait_for etcd 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ETCD_PORT"

start kube-apiserver "$BIN/kube-apiserver" \
	--bind-address=127.0.0.1 --secure-port="$API_PORT" --advertise-address="$NODE_IP" \
	--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
	--service-cluster-ip-range="$SERVICE_CIDR" \
	--client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
	--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority="$PKI/ca.crt" \
	--kubelet-preferred-address-types=Hostname \
	--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--authorization-mode=Node,RBAC --allow-privileged=true --profiling=false
wait_for kube-apiserver 90 kc get --raw /readyz

start kube-controller-manager "$BIN/kube-controller-manager" \
	--kubeconfig="$RUN/controller-manager.kubeconfig" --authentication-kubeconfig="$RUN/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$RUN/controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port=20257 --leader-elect=false \
	--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
	--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
	--use-service-account-credentials=true --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false \
	--enable-hostpath-provisioner=true
start kube-scheduler "$BIN/kube-scheduler" \
	--kubeconfig="$RUN/scheduler.kubeconfig" --authentication-kubeconfig="$RUN/scheduler.kubeconfig" \
	--authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port=20259 --leader-elect=false --profiling=false

# ---- kubelet --------------------------------------------------------------
cat >"$RUN/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 20248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$PKI/kubelet-serving.crt"
tlsPrivateKeyFile: "$PKI/kubelet-serving.key"
containerRuntimeEndpoint: "unix://$CTRD_SOCK"
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
podPidsLimit: 1024
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"}
serializeImagePulls: false
registerNode: true
YAML
start kubelet "$BIN/kubelet" --config="$RUN/kubelet.yaml" --kubeconfig="$RUN/kubelet.kubeconfig" \
	--root-dir="$RUN/kubelet" --cert-dir="$RUN/pki" --node-ip="$NODE_IP" --hostname-override="$NODE"
wait_for "node $NODE" 90 kc get node "$NODE"
wait_for "node $NODE Ready" 90 kc wait --for=condition=Ready "node/$NODE" --timeout=2s
wait_for "the default ServiceAccount" 60 kc get serviceaccount default -n default
storage_class

agent_image=sandboxd:latest
docker image inspect sandboxd:latest >/dev/null 2>&1 || agent_image=sandboxd-k8s-agent:dev
cat >"$RUN/env" <<ENV
export KUBECONFIG=$KUBECONFIG_OUT
export SANDBOXD_TEST_K8S_AGENT_IMAGE=$agent_image
export SANDBOXD_TEST_K8S_STORAGE_CLASS=$STORAGE_CLASS
ENV
log "build check $((tb - t0)) s, images $((ti - tb)) s, control plane and node $(($(date +%s) - ti)) s (source $RUN/env for the test variables)"
echo "$KUBECONFIG_OUT"
