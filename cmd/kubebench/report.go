package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// report renders the section: the figures of both backends row by row, and
// the targets, each met or not by computation.
func report(f flags, machine, k8sVersion string, got map[string]*figures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Kubernetes backend next to the Docker backend\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; Kubernetes %s (single node on this machine, scripts/k8s-up.sh; containerd 1.6 for the node); load average at the end %s; image `%s`, agent image `%s`._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, k8sVersion, bench.LoadAverage(), f.image, f.agentImage)
	fmt.Fprintf(&b, "| figure | backend | n | p50 | p90 | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(what, backend string, s []time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", what, backend, len(s),
			bench.Ms(bench.Percentile(s, 50)), bench.Ms(bench.Percentile(s, 90)), bench.Ms(bench.Percentile(s, 99)), bench.Ms(bench.Percentile(s, 100)))
	}
	for _, k := range []struct{ what, field string }{
		{"create until the first agent answer (Manager.Create, pipe attached, one stat)", "create"},
		{"read a 4 KiB file on the open agent pipe", "pipe"},
		{"the same read over a fresh exec (docker: exec create+attach; kubernetes: one exec through the API server, as `kubectl exec`; then handshake, read, close)", "fresh"},
	} {
		for _, name := range []string{"docker", "kubernetes"} {
			g := got[name]
			s := map[string][]time.Duration{"create": g.Create, "pipe": g.Pipe, "fresh": g.Fresh}[k.field]
			row(k.what, name, s)
		}
	}
	fmt.Fprintf(&b, "\n| target (issue 8) | measured | result |\n| --- | --- | --- |\n")
	for _, c := range checks(got) {
		fmt.Fprintf(&b, "| %s | %s | **%s** |\n", c.Target, c.Got, c.Mark())
	}
	fmt.Fprintf(&b, "\nHow: `. /var/lib/sandboxd-k8s/env && go run ./cmd/kubebench` with the cluster up (`scripts/k8s-up.sh`); both backends in one process; creates interleaved (docker, kubernetes, ...), %d each; then %d reads on the open pipe and %d over fresh execs per backend, one sandbox each. The Kubernetes pipe is one exec through the API server kept open (SPDY/WebSocket via the kubelet and the node's containerd); Docker's is one hijacked exec. A Kubernetes create is mostly the node's work: the pod is scheduled, its sandbox and network made, the init container (which installs the agent) run, and its exit noticed by the kubelet at its next relist (once a second), before the sandbox container starts; sandboxd's own part is the API calls, a watch on the pod and one exec to attach (60–90 ms here).\n", f.creates, f.calls, f.fresh)
	return b.String()
}

// checks computes the targets from the figures.
func checks(got map[string]*figures) []bench.Check {
	dp, kp := bench.Percentile(got["docker"].Pipe, 50), bench.Percentile(got["kubernetes"].Pipe, 50)
	kf := bench.Percentile(got["kubernetes"].Fresh, 50)
	diff := kp - dp
	if diff < 0 {
		diff = -diff
	}
	return []bench.Check{
		{Target: "Kubernetes pipe p50 within 1 ms of Docker's once attached (the pipe is opened once)", Got: fmt.Sprintf("%s vs %s (difference %s)", bench.Ms(kp), bench.Ms(dp), bench.Ms(diff)), Met: kp > 0 && dp > 0 && diff < time.Millisecond},
		bench.RatioAtLeast("Kubernetes pipe p50 at least 20x faster than one fresh API exec per call", kf, kp, 20),
	}
}
