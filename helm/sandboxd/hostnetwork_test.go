package chart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
)

// TestHostNetwork: for a cluster where pods have no route to the API server
// (no kube-proxy), sandboxd can run in the node's network namespace, bound
// to its loopback only, replica i on service.port + i, probed there, with
// the API server's address given by extraEnv; by default none of that is
// rendered.
func TestHostNetwork(t *testing.T) {
	vals := map[string]any{
		"hostNetwork": true,
		"service":     map[string]any{"port": 27788},
		"extraEnv":    []any{map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}},
	}
	pod := get(must(t, render(t, vals), "StatefulSet/sd-sandboxd"), "spec", "template", "spec")
	c := get(pod, "containers", "0")
	if get(pod, "hostNetwork") != true || str(pod, "dnsPolicy") != "ClusterFirstWithHostNet" {
		t.Errorf("pod hostNetwork = %v, dnsPolicy = %q", get(pod, "hostNetwork"), str(pod, "dnsPolicy"))
	}
	if args := strings.Join(strs(c, "args"), " "); !strings.Contains(args, "--listen 127.0.0.1:27788 --listen-add-pod-index") {
		t.Errorf("args %q: on the node's network replica i must listen on loopback only, at port 27788 + i", args)
	}
	// A declared port is a host port here, and two replicas on one node
	// could then not be scheduled.
	if p := get(c, "ports"); p != nil {
		t.Errorf("ports = %v; on the node's network they would be host ports and keep a second replica off the node", p)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if get(c, probe, "httpGet") != nil || len(strs(c, probe, "exec", "command")) != 3 {
			t.Errorf("%s = %v, want an exec probe (an httpGet probe has one port for every replica)", probe, get(c, probe))
		}
		if cmd := strings.Join(strs(c, probe, "exec", "command"), " "); strings.Contains(cmd, "$(") {
			t.Errorf("%s command %q holds $(, which the kubelet expands as a variable reference", probe, cmd)
		}
	}
	names, field := envOf(c)
	if i := slices.Index(names, "KUBERNETES_SERVICE_HOST"); i < 0 || field["KUBERNETES_SERVICE_HOST"] != "value:127.0.0.1" || !slices.Contains(names[:i], "SANDBOXD_POD_INDEX") {
		t.Errorf("env = %v, want the chart's downward env, then extraEnv's KUBERNETES_SERVICE_HOST", names)
	}

	pod = get(must(t, render(t, nil), "StatefulSet/sd-sandboxd"), "spec", "template", "spec")
	c = get(pod, "containers", "0")
	if get(pod, "hostNetwork") != nil || get(c, "readinessProbe", "exec") != nil || get(c, "readinessProbe", "httpGet", "host") != nil {
		t.Errorf("default values render hostNetwork %v, readiness probe %v; want neither", get(pod, "hostNetwork"), get(c, "readinessProbe"))
	}

	bad, err := chartutil.ReadValues([]byte("extraEnv: [{value: x}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.ToRenderValues(load(t), bad, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS}, chartutil.DefaultCapabilities); err == nil || !strings.Contains(err.Error(), "extraEnv") {
		t.Errorf("an extraEnv entry without a name gave %v, want a schema error naming extraEnv", err)
	}

	err = renderErr(t, map[string]any{"hostNetwork": true, "replicaCount": 3, "service": map[string]any{"port": 65534}})
	if !strings.Contains(err.Error(), "lower service.port") {
		t.Errorf("replicas past port 65535: %v, want a sentence saying to lower service.port", err)
	}
}

// TestHostNetworkProbes runs the rendered exec probes with bash, as the
// kubelet runs them in the container: each replica's probe asks its own
// port (service.port + its index), passes on 200 and fails on another
// response or on nothing listening.
func TestHostNetworkProbes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine; sandboxd's image has one")
	}
	ready := make(chan int, 1)
	ready <- http.StatusOK
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := <-ready
		ready <- code
		if r.URL.Path != "/readyz" && r.URL.Path != "/healthz" {
			code = http.StatusNotFound
		}
		w.WriteHeader(code)
		fmt.Fprintln(w, `{"status":"ok"}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	// The listener is replica 1's: base port one below it.
	vals := map[string]any{"hostNetwork": true, "service": map[string]any{"port": port - 1}}
	c := get(must(t, render(t, vals), "StatefulSet/sd-sandboxd"), "spec", "template", "spec", "containers", "0")
	probe := func(kind string, index int) error {
		cmd := strs(c, kind, "exec", "command")
		if len(cmd) != 3 || cmd[0] != "bash" {
			t.Fatalf("%s command = %v, want [bash -c SCRIPT]", kind, cmd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		run := exec.CommandContext(ctx, bash, cmd[1:]...)
		run.Env = append(os.Environ(), fmt.Sprintf("SANDBOXD_POD_INDEX=%d", index))
		out, err := run.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	for _, kind := range []string{"readinessProbe", "livenessProbe"} {
		if err := probe(kind, 1); err != nil {
			t.Errorf("%s of replica 1 with its sandboxd answering 200: %v", kind, err)
		}
		if err := probe(kind, 0); err == nil {
			t.Errorf("%s of replica 0 passed, but only replica 1's port answers", kind)
		}
	}
	<-ready
	ready <- http.StatusServiceUnavailable
	if err := probe("readinessProbe", 1); err == nil {
		t.Error("the readiness probe passed on a 503 answer")
	}
}
