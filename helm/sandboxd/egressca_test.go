package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/egress"
)

// The chart makes one egress CA for every replica: a Secret sandboxd loads
// from egress.ca_dir, mounted readable by the pod's group.
func TestEgressCAIsSharedThroughASecret(t *testing.T) {
	objs := render(t, map[string]any{"replication": map[string]any{"enabled": true}, "replicaCount": 3})
	sec := must(t, objs, "Secret/sd-sandboxd-egress-ca")
	crt, key := str(sec, "stringData", "ca.crt"), str(sec, "stringData", "ca.key")
	if crt == "" || key == "" {
		t.Fatalf("the egress CA Secret lacks ca.crt or ca.key: %v", get(sec, "stringData"))
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(crt), 0o440)
	os.WriteFile(filepath.Join(dir, "ca.key"), []byte(key), 0o440)
	ca, err := egress.LoadOrCreateAuthority(dir)
	if err != nil {
		t.Fatalf("sandboxd cannot load the chart's CA: %v", err)
	}
	if !ca.Certificate().IsCA {
		t.Fatal("the chart's egress CA is not a CA certificate")
	}
	if _, err := ca.Leaf("api.github.com"); err != nil {
		t.Fatalf("the chart's CA cannot sign a leaf: %v", err)
	}

	if cfg := parseConfig(t, objs); cfg.Egress.CADir != "/etc/sandboxd/egress-ca" {
		t.Fatalf("egress.ca_dir = %q, want the Secret's mount", cfg.Egress.CADir)
	}
	sts := must(t, objs, "StatefulSet/sd-sandboxd")
	found := false
	for _, v := range get(sts, "spec", "template", "spec", "volumes").([]any) {
		if str(v, "name") == "egress-ca" {
			found = str(v, "secret", "secretName") == "sd-sandboxd-egress-ca" && fmt.Sprint(get(v, "secret", "defaultMode")) == fmt.Sprint(0o440)
		}
	}
	if !found {
		t.Fatalf("the StatefulSet does not mount the egress CA Secret group-readable: %v", get(sts, "spec", "template", "spec", "volumes"))
	}
}
