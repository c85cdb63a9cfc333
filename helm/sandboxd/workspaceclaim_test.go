package chart

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// sandboxes.workspaceClaim reaches the config, and only then may sandboxd
// touch PersistentVolumeClaims.
func TestWorkspaceClaimValues(t *testing.T) {
	objs := render(t, nil)
	if cfg := parseConfig(t, objs); cfg.Kubernetes.WorkspaceClaim.Enabled() {
		t.Errorf("workspace_claim = %+v with default values, want it off", cfg.Kubernetes.WorkspaceClaim)
	}
	if verbs, ok := roleGrants(must(t, objs, "Role/sd-sandboxd"))["/persistentvolumeclaims"]; ok {
		t.Errorf("the Role grants %v on persistentvolumeclaims without workspace claims", verbs)
	}

	objs = render(t, map[string]any{"sandboxes": map[string]any{"workspaceClaim": map[string]any{"storageClass": "fast-ssd", "size": "20Gi"}}})
	w := parseConfig(t, objs).Kubernetes.WorkspaceClaim
	if !w.Enabled() || w.StorageClass != "fast-ssd" || w.Size != "20Gi" {
		t.Errorf("workspace_claim = %+v, want fast-ssd of 20Gi", w)
	}
	if verbs := roleGrants(must(t, objs, "Role/sd-sandboxd"))["/persistentvolumeclaims"]; !slices.Equal(verbs, []string{"create", "delete", "get", "list", "patch"}) {
		t.Errorf("the Role grants %v on persistentvolumeclaims, want create, delete, get, list and patch", verbs)
	}
	// The cluster's default class: no storage_class in the config.
	objs = render(t, map[string]any{"sandboxes": map[string]any{"workspaceClaim": map[string]any{"size": "1Gi"}}})
	if w := parseConfig(t, objs).Kubernetes.WorkspaceClaim; w.Size != "1Gi" || w.StorageClass != "" {
		t.Errorf("workspace_claim = %+v, want 1Gi of the default class", w)
	}
}

func TestWorkspaceClaimSchema(t *testing.T) {
	c := load(t)
	for _, tc := range []struct{ vals, want string }{
		{"sandboxes: {workspaceClaim: {size: ten gigs}}", "size"},
		{"sandboxes: {workspaceClaim: {size: 10GB}}", "size"},
		{"sandboxes: {workspaceClaim: {size: 10Gi, storageClass: Fast_SSD}}", "storageClass"},
		{"sandboxes: {workspaceClaim: {sise: 10Gi}}", "sise"},
	} {
		vals, err := chartutil.ReadValues([]byte(tc.vals))
		if err != nil {
			t.Fatal(err)
		}
		_, err = chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS}, chartutil.DefaultCapabilities)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q gave %v, want a schema error naming %s", tc.vals, err, tc.want)
		}
	}
}
