package chart

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/sandboxd/sandboxd/config"
)

const releaseNS = "ai"

// object is one rendered manifest.
type object = map[string]any

func load(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(".")
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return c
}

func valuesFile(t *testing.T, path string) map[string]any {
	t.Helper()
	if path == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// render renders the chart as `helm template` would and parses every
// manifest, keyed by "Kind/name".
func render(t *testing.T, vals map[string]any) map[string]object {
	t.Helper()
	files, err := renderFiles(t, vals, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return parseManifests(t, files)
}

// renderFiles renders every template; with a client provider, lookup
// reads the objects it serves, as on an upgrade.
func renderFiles(t *testing.T, vals map[string]any, cp engine.ClientProvider) (map[string]string, error) {
	t.Helper()
	c := load(t)
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS, IsInstall: cp == nil, IsUpgrade: cp != nil}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	if cp != nil {
		return engine.RenderWithClientProvider(c, rv, cp)
	}
	return engine.Render(c, rv)
}

func parseManifests(t *testing.T, files map[string]string) map[string]object {
	t.Helper()
	out := map[string]object{}
	for name, text := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(text))
		for {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s is not valid YAML: %v\n%s", name, err, text)
			}
			if o == nil {
				continue
			}
			key := str(o, "kind") + "/" + str(o, "metadata", "name")
			if _, dup := out[key]; dup {
				t.Fatalf("%s rendered twice", key)
			}
			out[key] = o
		}
	}
	return out
}

// get walks maps and lists ("0" indexes a list).
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := 0
			for _, c := range p {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func strs(v any, path ...string) []string {
	l, _ := get(v, path...).([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func must(t *testing.T, objs map[string]object, key string) object {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		keys := make([]string, 0, len(objs))
		for k := range objs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("no %s among %v", key, keys)
	}
	return o
}

func TestLint(t *testing.T) {
	for _, vf := range []string{"", "testdata/values-prod.yaml"} {
		l := lint.All(".", valuesFile(t, vf), releaseNS, false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %q): %s", vf, m)
			}
		}
	}
}

func TestDefaultValues(t *testing.T) {
	objs := render(t, nil)
	d := must(t, objs, "StatefulSet/sd-sandboxd")
	pod := get(d, "spec", "template", "spec")
	c := get(pod, "containers", "0")
	if img := str(c, "image"); img != "sandboxd:latest" {
		t.Errorf("image = %q, want sandboxd:latest", img)
	}
	args := strings.Join(strs(c, "args"), " ")
	for _, want := range []string{"serve", "--backend kubernetes", "--config /etc/sandboxd/config.yaml", "--listen 0.0.0.0:7788"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if p := str(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness probe path = %q", p)
	}
	if p := str(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe path = %q", p)
	}
	checkTight(t, "sandboxd", get(c, "securityContext"))
	checkTight(t, "the config init container", get(pod, "initContainers", "0", "securityContext"))
	if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext = %v, want non-root with the RuntimeDefault seccomp profile", get(pod, "securityContext"))
	}
	if sa := str(pod, "serviceAccountName"); sa != "sd-sandboxd" {
		t.Errorf("serviceAccountName = %q", sa)
	}
	must(t, objs, "ServiceAccount/sd-sandboxd")
	if p := get(must(t, objs, "Service/sd-sandboxd"), "spec", "ports", "0", "port"); p != 7788 {
		t.Errorf("service port = %v", p)
	}

	// RBAC: pods, pods/exec and pods/log in the release namespace, no more
	// (workspace claims add theirs: workspaceclaim_test.go).
	role := must(t, objs, "Role/sd-sandboxd")
	if ns := str(role, "metadata", "namespace"); ns != releaseNS {
		t.Errorf("Role namespace = %q, want %q", ns, releaseNS)
	}
	got := map[string][]string{}
	rules, _ := get(role, "rules").([]any)
	for _, r := range rules {
		if g := strs(r, "apiGroups"); len(g) != 1 || g[0] != "" {
			t.Errorf("rule %v reaches API group %v; only the core group is needed", r, g)
		}
		for _, res := range strs(r, "resources") {
			got[res] = append(got[res], strs(r, "verbs")...)
		}
	}
	want := map[string][]string{
		"pods":      {"create", "delete", "get", "list", "patch", "watch"},
		"pods/exec": {"create", "get"},
		"pods/log":  {"get"},
		"events":    {"list"},
	}
	for res, verbs := range got {
		slices.Sort(verbs)
		if !slices.Equal(verbs, want[res]) {
			t.Errorf("Role grants %s on %s, want %v", verbs, res, want[res])
		}
	}
	if len(got) != len(want) {
		t.Errorf("Role covers %v, want exactly %v", got, want)
	}
	rb := must(t, objs, "RoleBinding/sd-sandboxd")
	if str(rb, "subjects", "0", "name") != "sd-sandboxd" || str(rb, "subjects", "0", "namespace") != releaseNS || str(rb, "roleRef", "name") != "sd-sandboxd" {
		t.Errorf("RoleBinding = %v", rb)
	}

	// The sandboxes' network is denied by the chart, so sandboxd does not
	// need rights on NetworkPolicies.
	np := must(t, objs, "NetworkPolicy/sd-sandboxd-deny-sandbox-network")
	if types := strs(np, "spec", "policyTypes"); !slices.Equal(types, []string{"Ingress", "Egress"}) || get(np, "spec", "egress") != nil {
		t.Errorf("sandbox NetworkPolicy = %v, want all ingress and egress denied", get(np, "spec"))
	}
	// Both isolated modes: "proxy" sandboxes reach the world only through
	// sandboxd's egress proxy.
	if str(np, "spec", "podSelector", "matchLabels", "io.sandboxd.managed") != "true" ||
		str(np, "spec", "podSelector", "matchExpressions", "0", "key") != "io.sandboxd.network" ||
		str(np, "spec", "podSelector", "matchExpressions", "0", "operator") != "In" ||
		!slices.Equal(strs(np, "spec", "podSelector", "matchExpressions", "0", "values"), []string{"none", "proxy"}) {
		t.Errorf("sandbox NetworkPolicy selects %v, want managed pods of network none and proxy", get(np, "spec", "podSelector"))
	}

	cfg := parseConfig(t, objs)
	if cfg.Kubernetes.Namespace != releaseNS || cfg.Kubernetes.AgentImage != "sandboxd:latest" || cfg.Kubernetes.NetworkPolicy {
		t.Errorf("config kubernetes = %+v", cfg.Kubernetes)
	}
	if cfg.Kubernetes.LinksDown == nil || !*cfg.Kubernetes.LinksDown {
		t.Errorf("config links_down = %v, want true by default", cfg.Kubernetes.LinksDown)
	}
	if cfg.DefaultImage != "sandboxd-sandbox:latest" {
		t.Errorf("default_image = %q", cfg.DefaultImage)
	}
	for _, k := range []string{"ServiceMonitor/sd-sandboxd", "PrometheusRule/sd-sandboxd", "ConfigMap/sd-sandboxd-dashboard", "Namespace/", "PersistentVolumeClaim/sd-sandboxd"} {
		for key := range objs {
			if strings.HasPrefix(key, k) {
				t.Errorf("%s rendered with default values; it is optional", key)
			}
		}
	}
}

func TestProductionValues(t *testing.T) {
	objs := render(t, valuesFile(t, "testdata/values-prod.yaml"))
	d := must(t, objs, "StatefulSet/sd-sandboxd")
	c := get(d, "spec", "template", "spec", "containers", "0")
	if img := str(c, "image"); img != "registry.example.com/sandboxd:v1.2.3" || str(c, "imagePullPolicy") != "Always" {
		t.Errorf("image = %q (%s)", img, str(c, "imagePullPolicy"))
	}
	if n := get(d, "spec", "replicas"); n != 3 {
		t.Errorf("replicas = %v, want 3", n)
	}
	if term := get(d, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "0"); str(term, "topologyKey") != "kubernetes.io/hostname" {
		t.Errorf("podAntiAffinity hard gave %v, want a required term on kubernetes.io/hostname", get(d, "spec", "template", "spec", "affinity"))
	}
	// Baseline would refuse the sandboxes' SYS_PTRACE (and NET_ADMIN of the
	// links-down init container): the namespace must admit them.
	if ns := must(t, objs, "Namespace/sandboxes"); str(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "privileged" {
		t.Errorf("the sandbox namespace enforces %q, want privileged (baseline refuses SYS_PTRACE): %v",
			str(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce"), ns)
	}
	for _, k := range []string{"Role/sd-sandboxd", "RoleBinding/sd-sandboxd", "NetworkPolicy/sd-sandboxd-deny-sandbox-network"} {
		if ns := str(must(t, objs, k), "metadata", "namespace"); ns != "sandboxes" {
			t.Errorf("%s is in namespace %q, want sandboxes", k, ns)
		}
	}
	if ns := str(must(t, objs, "RoleBinding/sd-sandboxd"), "subjects", "0", "namespace"); ns != releaseNS {
		t.Errorf("RoleBinding subject namespace = %q, want the release namespace", ns)
	}
	// Leases and run records stay in the release namespace, beside sandboxd.
	for _, k := range []string{"Role/sd-sandboxd-replication", "RoleBinding/sd-sandboxd-replication"} {
		if ns := str(must(t, objs, k), "metadata", "namespace"); ns != releaseNS {
			t.Errorf("%s is in namespace %q, want the release namespace %s", k, ns, releaseNS)
		}
	}
	if cfg := parseConfig(t, objs); cfg.Replication.Namespace != releaseNS {
		t.Errorf("replication.namespace = %q, want the release namespace %s, where the Role lets sandboxd keep its Leases", cfg.Replication.Namespace, releaseNS)
	}

	cfg := parseConfig(t, objs)
	k := cfg.Kubernetes
	if k.Namespace != "sandboxes" || k.RuntimeClassName != "gvisor" || k.ImagePullPolicy != "Never" || k.AgentImage != "registry.example.com/sandboxd:v1.2.3" ||
		k.NodeSelector["sandboxd.io/pool"] != "sandboxes" {
		t.Errorf("config kubernetes = %+v", k)
	}
	if k.LinksDown == nil || *k.LinksDown {
		t.Errorf("links_down = %v, want false from sandboxes.linksDown", k.LinksDown)
	}
	if time.Duration(cfg.IdleTTL) != 30*time.Minute {
		t.Errorf("idle_ttl = %v, want extraConfig's 30m", cfg.IdleTTL)
	}
	sum := sha256.Sum256([]byte("team-a-token-0123456789"))
	wantTenants := []config.Tenant{
		{Name: "team-a", TokenSHA256: hex.EncodeToString(sum[:])},
		{Name: "team-b", TokenSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
	}
	if !reflect.DeepEqual(cfg.Tenants, wantTenants) {
		t.Errorf("tenants = %v, want %v", cfg.Tenants, wantTenants)
	}
	sec := must(t, objs, "Secret/sd-sandboxd-tenants")
	if str(sec, "stringData", "token-team-a") != "team-a-token-0123456789" || get(sec, "stringData", "token-team-b") != nil {
		t.Errorf("tenants Secret = %v", get(sec, "stringData"))
	}
	for _, key := range []string{"ConfigMap/sd-sandboxd"} {
		if strings.Contains(str(must(t, objs, key), "data", "config.yaml"), "team-a-token") {
			t.Errorf("%s holds a plain token", key)
		}
	}

	if ep := str(must(t, objs, "ServiceMonitor/sd-sandboxd"), "spec", "endpoints", "0", "path"); ep != "/metrics" {
		t.Errorf("ServiceMonitor path = %q", ep)
	}
	groups := get(must(t, objs, "PrometheusRule/sd-sandboxd"), "spec", "groups", "0", "rules")
	if rules, _ := groups.([]any); len(rules) < 4 {
		t.Errorf("PrometheusRule has %d rules", len(rules))
	}
	dash := must(t, objs, "ConfigMap/sd-sandboxd-dashboard")
	if str(dash, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Errorf("dashboard labels = %v", get(dash, "metadata", "labels"))
	}
	file, err := os.ReadFile("dashboards/sandboxd.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := str(dash, "data", "sandboxd.json"); got != strings.TrimRight(string(file), "\n") {
		t.Errorf("the dashboard ConfigMap does not carry dashboards/sandboxd.json (%d bytes vs %d)", len(got), len(file))
	}
	if from := get(must(t, objs, "NetworkPolicy/sd-sandboxd"), "spec", "ingress", "0", "from"); from == nil {
		t.Error("sandboxd's NetworkPolicy ignores networkPolicy.ingressFrom")
	}
}

// parseConfig puts the file together as the init container does (ConfigMap
// then the Secret's tenants) and reads it with sandboxd's own parser.
func parseConfig(t *testing.T, objs map[string]object) *config.Config {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(str(must(t, objs, "ConfigMap/sd-sandboxd"), "data", "config.yaml"))
	b.WriteString(str(must(t, objs, "Secret/sd-sandboxd-tenants"), "stringData", "tenants.yaml"))
	cfg, err := config.Parse(b.Bytes())
	if err != nil {
		t.Fatalf("sandboxd refuses the rendered config: %v\n%s", err, b.String())
	}
	return cfg
}

func checkTight(t *testing.T, who string, sc any) {
	t.Helper()
	if get(sc, "allowPrivilegeEscalation") != false || get(sc, "readOnlyRootFilesystem") != true ||
		!slices.Equal(strs(sc, "capabilities", "drop"), []string{"ALL"}) || get(sc, "capabilities", "add") != nil {
		t.Errorf("%s securityContext = %v, want no privilege escalation, a read-only root and all capabilities dropped", who, sc)
	}
}

func TestSchemaRejectsBadValues(t *testing.T) {
	c := load(t)
	for _, tc := range []struct {
		name string
		vals string
		want string
	}{
		{"no replica", "replicaCount: 0", "replicaCount"},
		{"half a replica", "replicaCount: 1.5", "replicaCount"},
		{"anti-affinity", "podAntiAffinity: sometimes", "podAntiAffinity"},
		{"lease duration", "replication: {leaseDuration: soon}", "leaseDuration"},
		{"replication typo", "replication: {enable: true}", "enable"},
		{"pull policy", "image: {pullPolicy: Sometimes}", "pullPolicy"},
		{"tenant without token", "tenants: [{name: team-a}]", "tenants"},
		{"bad sandbox namespace", "sandboxes: {namespace: Sand_Boxes}", "namespace"},
		{"bad duration", "idleTTL: two hours", "idleTTL"},
		{"bad deployment", "deployment: Prod_EU", "deployment"},
	} {
		vals, err := chartutil.ReadValues([]byte(tc.vals))
		if err != nil {
			t.Fatal(err)
		}
		_, err = chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS}, chartutil.DefaultCapabilities)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: values %q gave %v, want a schema error naming %s", tc.name, tc.vals, err, tc.want)
		}
	}
}

// Every sandbox of a release carries one deployment name: the value, else
// the release's name.
func TestDeploymentName(t *testing.T) {
	if cfg := parseConfig(t, render(t, nil)); cfg.Deployment != "sd" {
		t.Errorf("deployment = %q, want the release name sd", cfg.Deployment)
	}
	if cfg := parseConfig(t, render(t, map[string]any{"deployment": "prod-eu"})); cfg.Deployment != "prod-eu" {
		t.Errorf("deployment = %q, want prod-eu as set", cfg.Deployment)
	}
}
