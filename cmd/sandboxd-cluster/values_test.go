package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	chart "github.com/sandboxd/sandboxd/helm/sandboxd"
)

func deployOptions(t *testing.T, args ...string) options {
	t.Helper()
	t.Setenv("KUBECONFIG", "/tmp/kubeconfig")
	t.Setenv("SANDBOXD_TEST_IMAGE", "")
	o, err := parseFlags("deploy", args)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// manifests renders the compiled-in chart with vals, as `helm template`.
func manifests(t *testing.T, vals map[string]any, namespace string) map[string]map[string]any {
	t.Helper()
	c, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "sandboxd", Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("the chart refuses deploy's values: %v", err)
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	out := map[string]map[string]any{}
	for name, text := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(text))
		for {
			var o map[string]any
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if o != nil {
				meta, _ := o["metadata"].(map[string]any)
				out[o["kind"].(string)+"/"+meta["name"].(string)] = o
			}
		}
	}
	return out
}

func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// What deploy installs: N replicas of sandboxd from the node's images, on
// the node's loopback at port + index, reaching the API server where the
// kubeconfig does, with tenant e2e's token.
func TestChartValues(t *testing.T) {
	o := deployOptions(t, "--replicas", "3")
	vals, err := chartValues(o, "https://127.0.0.1:16443", "tok-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	objs := manifests(t, vals, o.namespace)
	sts, ok := objs["StatefulSet/sandboxd"]
	if !ok {
		t.Fatalf("no StatefulSet/sandboxd among %v", slices.Sorted(func(yield func(string) bool) {
			for k := range objs {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if n := dig(sts, "spec", "replicas"); n != 3 {
		t.Errorf("replicas = %v, want 3", n)
	}
	pod := dig(sts, "spec", "template", "spec")
	c := dig(pod, "containers", 0)
	if dig(pod, "hostNetwork") != true || dig(c, "image") != "sandboxd:latest" || dig(c, "imagePullPolicy") != "Never" {
		t.Errorf("hostNetwork %v, image %v (%v); want the node's sandboxd:latest on its network", dig(pod, "hostNetwork"), dig(c, "image"), dig(c, "imagePullPolicy"))
	}
	var args []string
	for _, a := range dig(c, "args").([]any) {
		args = append(args, a.(string))
	}
	if s := strings.Join(args, " "); !strings.Contains(s, "--listen 127.0.0.1:27800 --listen-add-pod-index") {
		t.Errorf("args %q, want replica i on 127.0.0.1:27800+i", s)
	}
	env := map[string]any{}
	for _, e := range dig(c, "env").([]any) {
		env[dig(e, "name").(string)] = dig(e, "value")
	}
	if env["KUBERNETES_SERVICE_HOST"] != "127.0.0.1" || env["KUBERNETES_SERVICE_PORT"] != "16443" {
		t.Errorf("env %v, want the API server at 127.0.0.1:16443 (the cluster has no kube-proxy)", env)
	}
	tenants := dig(objs["Secret/sandboxd-tenants"], "stringData", "tenants.yaml").(string)
	sum := sha256.Sum256([]byte("tok-0123456789abcdef"))
	if !strings.Contains(tenants, "name: e2e") || !strings.Contains(tenants, hex.EncodeToString(sum[:])) {
		t.Errorf("tenants.yaml = %q, want tenant e2e with the token's SHA-256", tenants)
	}
	cfg := dig(objs["ConfigMap/sandboxd"], "data", "config.yaml").(string)
	for _, want := range []string{"deployment: sandboxd", "namespace: sandboxd-replicas", "default_image: sandboxd-sandbox:latest", "image_pull_policy: Never"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
		}
	}

	if got := urls(o); !slices.Equal(got, []string{"http://127.0.0.1:27800", "http://127.0.0.1:27801", "http://127.0.0.1:27802"}) {
		t.Errorf("urls = %v", got)
	}
}

func TestAPIHostPort(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"https://127.0.0.1:16443", "127.0.0.1", "16443"},
		{"https://10.0.0.1", "10.0.0.1", "443"},
		{"https://[::1]:6443", "::1", "6443"},
	} {
		h, p, err := apiHostPort(tc.in)
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("apiHostPort(%q) = %q, %q, %v; want %q, %q", tc.in, h, p, err, tc.host, tc.port)
		}
	}
	if _, _, err := apiHostPort("not a url"); err == nil {
		t.Error("a server that is not a URL was accepted")
	}
}

func TestImageSplit(t *testing.T) {
	for _, tc := range []struct{ image, repo, tag string }{
		{"sandboxd:latest", "sandboxd", "latest"},
		{"registry.local:5000/sandboxd", "registry.local:5000/sandboxd", "latest"},
		{"sandboxd:dev", "sandboxd", "dev"},
	} {
		o := deployOptions(t, "--image", tc.image)
		vals, err := chartValues(o, "https://127.0.0.1:16443", "tok-0123456789abcdef")
		if err != nil {
			t.Fatal(err)
		}
		img := vals["image"].(map[string]any)
		if img["repository"] != tc.repo || img["tag"] != tc.tag {
			t.Errorf("--image %s gave %v, want %s and %s", tc.image, img, tc.repo, tc.tag)
		}
	}
}
