package config

import (
	"strings"
	"testing"
)

func TestKubernetesKeys(t *testing.T) {
	c, err := Parse([]byte("kubernetes:\n  namespace: sandboxes\n  agent_image: sandboxd:1\n  image_pull_policy: Never\n  network_policy: true\n  links_down: false\n  requests: {cpus: 0.2, memory_mb: 128}\n  start_timeout: 90s\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kubernetes
	if k.Namespace != "sandboxes" || k.AgentImage != "sandboxd:1" || k.ImagePullPolicy != "Never" || !k.NetworkPolicy ||
		k.Requests.CPUs != 0.2 || k.Requests.MemoryMB != 128 || k.StartTimeout.D().Seconds() != 90 {
		t.Fatalf("kubernetes = %+v", k)
	}
	if k.LinksDown == nil || *k.LinksDown {
		t.Errorf("links_down: false read as %v", k.LinksDown)
	}
	if c, err := Parse([]byte("kubernetes: {namespace: x}\n")); err != nil || c.Kubernetes.LinksDown != nil {
		t.Errorf("links_down unset = %v, %v; want nil (the backend's default, on)", c.Kubernetes.LinksDown, err)
	}
	if _, err := Parse([]byte("kubernetes:\n  namespce: x\n")); err == nil || !strings.Contains(err.Error(), "namespce") {
		t.Errorf("a typo in a kubernetes key = %v, want it named", err)
	}
	for _, tc := range []struct {
		k    Kubernetes
		want string
	}{
		{Kubernetes{ImagePullPolicy: "Sometimes"}, "image_pull_policy"},
		{Kubernetes{Namespace: "Bad_NS"}, "kubernetes.namespace"},
		{Kubernetes{RuntimeClassName: "g visor"}, "runtime_class_name"},
		{Kubernetes{Requests: KubernetesRequests{CPUs: -1}}, "requests"},
		{Kubernetes{StartTimeout: -1}, "start_timeout"},
	} {
		if err := tc.k.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.k, err, tc.want)
		}
	}
	if err := (Kubernetes{}).Validate(); err != nil {
		t.Errorf("empty kubernetes keys: %v", err)
	}
}

func TestKubernetesWorkspaceClaim(t *testing.T) {
	c, err := Parse([]byte("kubernetes:\n  workspace_claim: {storage_class: fast-ssd, size: 20Gi}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Kubernetes.WorkspaceClaim; !w.Enabled() || w.StorageClass != "fast-ssd" || w.Size != "20Gi" {
		t.Fatalf("workspace_claim = %+v", w)
	}
	if c, err := Parse([]byte("kubernetes: {namespace: x}\n")); err != nil || c.Kubernetes.WorkspaceClaim.Enabled() {
		t.Errorf("no workspace_claim = %+v, %v; want claims off", c.Kubernetes.WorkspaceClaim, err)
	}
	for _, ok := range []string{"1Gi", "500Mi", "0.5Gi", "10G", "1073741824"} {
		if err := (Kubernetes{WorkspaceClaim: KubernetesClaim{Size: ok}}).Validate(); err != nil {
			t.Errorf("size %q: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		claim KubernetesClaim
		want  string
	}{
		{KubernetesClaim{StorageClass: "standard"}, "workspace_claim.size: is empty"},
		{KubernetesClaim{Size: "ten gigs"}, "workspace_claim.size"},
		{KubernetesClaim{Size: "10GB"}, "workspace_claim.size"},
		{KubernetesClaim{Size: "0Gi"}, "workspace_claim.size"},
		{KubernetesClaim{Size: "-1Gi"}, "workspace_claim.size"},
		{KubernetesClaim{Size: "1Gi", StorageClass: "Fast_SSD"}, "workspace_claim.storage_class"},
	} {
		err := (Kubernetes{WorkspaceClaim: tc.claim}).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.claim, err, tc.want)
		}
	}
}
