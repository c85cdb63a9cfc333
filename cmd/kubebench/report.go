package main

import (
	"fmt"

	"github.com/sandboxd/sandboxd/bench"
)

// report words the kubernetes section; the measurement and the table are
// bench's, shared with cmd/containerdbench.
func report(f flags, k8sVersion string) bench.BackendReport {
	return bench.BackendReport{
		Backend:     "kubernetes",
		Title:       "Kubernetes backend next to the Docker backend",
		Setting:     fmt.Sprintf("Kubernetes %s (single node on this machine, scripts/k8s-up.sh; containerd 1.6 for the node); image `%s`, agent image `%s`", k8sVersion, f.image, f.agentImage),
		FreshWhat:   "docker: exec create+attach; kubernetes: one exec through the API server, as `kubectl exec`; then handshake, read, close",
		PipeTarget:  "Kubernetes pipe p50 within 1 ms of Docker's once attached (the pipe is opened once)",
		FreshTarget: "Kubernetes pipe p50 at least 20x faster than one fresh API exec per call",
		How:         "`. /var/lib/sandboxd-k8s/env && go run ./cmd/kubebench` with the cluster up (`scripts/k8s-up.sh`; `make bench` runs it when that env file is there)",
		After: "The Kubernetes pipe is one exec through the API server kept open (SPDY/WebSocket via the kubelet and the node's containerd); Docker's is one hijacked exec. " +
			"A Kubernetes create is mostly the node's work: the pod is scheduled, its sandbox and network made, the init container (which installs the agent) run, and its exit noticed by the kubelet at its next relist (once a second), before the sandbox container starts; " +
			"sandboxd's own part is the API calls, a watch on the pod and one exec to attach (60–90 ms here).",
		Creates: f.creates, Calls: f.calls, Fresh: f.fresh,
	}
}
