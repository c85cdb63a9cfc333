package chart

import (
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
