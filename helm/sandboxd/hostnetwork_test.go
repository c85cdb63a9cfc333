package chart

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// TestHostNetwork: for a cluster where pods have no route to the API server
// (no kube-proxy), sandboxd can run in the node's network namespace, bound
// to its loopback only, probed there, with the API server's address given
// by extraEnv; by default none of that is rendered.
func TestHostNetwork(t *testing.T) {
	vals := map[string]any{
		"hostNetwork": true,
		"service":     map[string]any{"port": 27788},
		"extraEnv":    []any{map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}},
	}
	pod := get(must(t, render(t, vals), "Deployment/sd-sandboxd"), "spec", "template", "spec")
	c := get(pod, "containers", "0")
	if get(pod, "hostNetwork") != true || str(pod, "dnsPolicy") != "ClusterFirstWithHostNet" {
		t.Errorf("pod hostNetwork = %v, dnsPolicy = %q", get(pod, "hostNetwork"), str(pod, "dnsPolicy"))
	}
	if args := strings.Join(strs(c, "args"), " "); !strings.Contains(args, "--listen 127.0.0.1:27788") {
		t.Errorf("args %q: on the node's network sandboxd must listen on loopback only", args)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if h := str(c, probe, "httpGet", "host"); h != "127.0.0.1" {
			t.Errorf("%s host = %q, want 127.0.0.1 (where sandboxd listens)", probe, h)
		}
	}
	if n := str(c, "env", "0", "name"); n != "KUBERNETES_SERVICE_HOST" || str(c, "env", "0", "value") != "127.0.0.1" {
		t.Errorf("env = %v", get(c, "env"))
	}

	pod = get(must(t, render(t, nil), "Deployment/sd-sandboxd"), "spec", "template", "spec")
	c = get(pod, "containers", "0")
	if get(pod, "hostNetwork") != nil || get(c, "env") != nil || get(c, "readinessProbe", "httpGet", "host") != nil {
		t.Errorf("default values render hostNetwork %v, env %v, probe host %v; want none", get(pod, "hostNetwork"), get(c, "env"), get(c, "readinessProbe", "httpGet", "host"))
	}

	bad, err := chartutil.ReadValues([]byte("extraEnv: [{value: x}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.ToRenderValues(load(t), bad, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS}, chartutil.DefaultCapabilities); err == nil || !strings.Contains(err.Error(), "extraEnv") {
		t.Errorf("an extraEnv entry without a name gave %v, want a schema error naming extraEnv", err)
	}
}
