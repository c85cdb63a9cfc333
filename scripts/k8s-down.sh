#!/usr/bin/env bash
# Tears down the cluster scripts/k8s-up.sh started: every pod container, the
# kubelet, the control plane, etcd and the private containerd are stopped;
# pod volumes are unmounted; the bridge, the kubepods cgroups and the paths
# some components write outside their root are removed. The binaries and
# the imported images ($K8S_CACHE and $K8S_IMAGE_CACHE, under /var/cache/sandboxd-k8s) stay for the next bring-up;
# PURGE=1 removes those too. Safe to run when nothing is up.
set -uo pipefail

CACHE="${K8S_CACHE:-/var/cache/sandboxd-k8s/build}"
RUN="${K8S_RUN_DIR:-/var/lib/sandboxd-k8s}"
# The private containerd's root outlives a teardown, so imported images are
# reused; it is kept out of the repository (gigabytes of image layers).
IMAGE_CACHE="${K8S_IMAGE_CACHE:-/var/cache/sandboxd-k8s/containerd}"
BRIDGE=sbxk8s0
CTRD_SOCK="$RUN/containerd/containerd.sock"
export PATH="$PATH:/usr/sbin:/sbin"

log() { echo "k8s-down: $*" >&2; }

# stop NAME: SIGTERM, then SIGKILL after 10 s; only the pid we recorded.
stop() {
	local f="$RUN/pids/$1" pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$f"
}

stop kubelet
# Pod containers: kill their tasks and remove them (with their snapshots)
# through the private containerd, then its shims go with it.
if [ -S "$CTRD_SOCK" ]; then
	for c in $(ctr -n k8s.io -a "$CTRD_SOCK" tasks ls -q 2>/dev/null); do
		ctr -n k8s.io -a "$CTRD_SOCK" tasks kill -s SIGKILL "$c" >/dev/null 2>&1
	done
	sleep 0.5
	for c in $(ctr -n k8s.io -a "$CTRD_SOCK" tasks ls -q 2>/dev/null); do
		ctr -n k8s.io -a "$CTRD_SOCK" tasks delete -f "$c" >/dev/null 2>&1
	done
	for c in $(ctr -n k8s.io -a "$CTRD_SOCK" containers ls -q 2>/dev/null); do
		ctr -n k8s.io -a "$CTRD_SOCK" containers delete "$c" >/dev/null 2>&1
	done
fi
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd
stop containerd
# Shims of our containerd that outlived it (their command line names our socket).
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CTRD_SOCK" 2>/dev/null); do
	kill -KILL "$pid" 2>/dev/null
done

# Mounts under the run dir and the containerd root (pod volumes, rootfs, shm).
for base in "$RUN" "$IMAGE_CACHE" /run/containerd/runc/k8s.io; do
	grep -F " $base" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
done
# Network namespaces made for our pods.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-'); do
	if ip netns exec "$ns" ip link show eth0 >/dev/null 2>&1 && ip netns exec "$ns" ip -4 addr show eth0 | grep -q 'inet 10\.244\.77\.'; then
		ip netns delete "$ns" 2>/dev/null
	fi
done
ip link delete "$BRIDGE" 2>/dev/null
# kubepods cgroups (cgroupfs driver, cgroup v1 and v2).
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$cg" ] || continue
	find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
done
# Paths that ignore --root-dir.
rm -rf /var/lib/kubelet/device-plugins /var/lib/kubelet/pod-resources /var/log/containers /var/log/pods \
	/var/lib/cni/results 2>/dev/null
rmdir /var/lib/kubelet 2>/dev/null
# The volumes the controller-manager's hostPath provisioner made (the
# claims of a cluster that is gone can no longer delete them).
rm -rf /tmp/hostpath_pv
rm -rf "$RUN"
if [ "${PURGE:-0}" = 1 ]; then
	rm -rf "$CACHE" "$IMAGE_CACHE"
	docker image rm sandboxd.local/pause:1 sandboxd-k8s-agent:dev >/dev/null 2>&1
	log "caches removed"
fi
log "down"
