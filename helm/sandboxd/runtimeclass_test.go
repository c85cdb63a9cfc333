package chart

import (
	"fmt"
	"strings"
	"testing"
)

// sandboxes.gvisor makes the RuntimeClass of runtime gvisor sandboxes
// (handler runsc) and hands its name to sandboxd; by default there is
// neither.
func TestGVisorRuntimeClass(t *testing.T) {
	objs := render(t, map[string]any{"sandboxes": map[string]any{"gvisor": map[string]any{"runtimeClass": "sandboxd-gvisor", "create": true}}})
	rc := must(t, objs, "RuntimeClass/sandboxd-gvisor")
	if str(rc, "handler") != "runsc" || str(rc, "apiVersion") != "node.k8s.io/v1" {
		t.Errorf("RuntimeClass = %v, want handler runsc", rc)
	}
	if got := parseConfig(t, objs).Kubernetes.GVisorRuntimeClass; got != "sandboxd-gvisor" {
		t.Errorf("sandboxd's kubernetes.gvisor_runtime_class = %q, want sandboxd-gvisor", got)
	}

	objs = render(t, nil)
	for k := range objs {
		if strings.HasPrefix(k, "RuntimeClass/") {
			t.Errorf("the default values render %s", k)
		}
	}
	if got := parseConfig(t, objs).Kubernetes.GVisorRuntimeClass; got != "" {
		t.Errorf("by default kubernetes.gvisor_runtime_class = %q, want none", got)
	}
}

// sandboxes.userNamespaces hands kubernetes.user_namespaces to sandboxd,
// off by default; the Role lets sandboxd read the events in which a node
// refuses a pod.
func TestUserNamespacesValue(t *testing.T) {
	if parseConfig(t, render(t, nil)).Kubernetes.UserNamespaces {
		t.Error("user namespaces are on by default")
	}
	objs := render(t, map[string]any{"sandboxes": map[string]any{"userNamespaces": true}})
	if !parseConfig(t, objs).Kubernetes.UserNamespaces {
		t.Error("sandboxes.userNamespaces true does not reach kubernetes.user_namespaces")
	}
	found := false
	for k, o := range objs {
		if strings.HasPrefix(k, "Role/") && strings.Contains(fmt.Sprint(o["rules"]), "events") {
			found = true
		}
	}
	if !found {
		t.Error("no Role lets sandboxd list events")
	}
}

// A tenant's webhooks reach sandboxd's config through the tenants Secret,
// signing secret included, and the config takes them.
func TestTenantWebhooksValue(t *testing.T) {
	objs := render(t, map[string]any{"tenants": []any{map[string]any{"name": "acme", "token": "0123456789abcdef0123",
		"webhooks": []any{map[string]any{"url": "https://hooks.example/sbx", "secret": "whsec", "events": []any{"sandbox.created"}, "max_age": "30m"}}}}})
	if !strings.Contains(str(must(t, objs, "Secret/sd-sandboxd-tenants"), "stringData", "tenants.yaml"), "whsec") {
		t.Error("the webhook's secret is not in the tenants Secret")
	}
	if strings.Contains(str(must(t, objs, "ConfigMap/sd-sandboxd"), "data", "config.yaml"), "whsec") {
		t.Error("the webhook's secret is in the ConfigMap")
	}
	eps := parseConfig(t, objs).WebhookEndpoints("admin")
	if len(eps) != 1 || eps[0].Tenant != "acme" || eps[0].URL != "https://hooks.example/sbx" || eps[0].Secret != "whsec" || eps[0].MaxAge.Minutes() != 30 {
		t.Errorf("webhook endpoints %+v; want acme's one", eps)
	}
}
