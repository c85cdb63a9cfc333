package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/egresstest"
)

// egressPair is one allowed and one refused server on this machine, and
// the config lines that say so.
type egressPair struct {
	ca           *egresstest.CA
	allowed, not *egresstest.Blob
}

func newEgressPair(t *testing.T) *egressPair {
	ca := egresstest.NewCA(t)
	return &egressPair{ca: ca, allowed: egresstest.NewBlob(t, ca, "allowed.test"), not: egresstest.NewBlob(t, ca, "refused.test")}
}

// yaml is the egress section (top-level keys) for the pair.
func (p *egressPair) yaml() string {
	return fmt.Sprintf("egress:\n  allow: [allowed.test]\n  deny: [refused.test]\n  hosts: {allowed.test: 127.0.0.1, refused.test: 127.0.0.1}\n  ca_files: [%s]\n", p.ca.PEMFile())
}

// check creates a proxy sandbox for conv and sees the allowed server
// answer, the refused one refused with the sentence, and both recorded.
func (p *egressPair) check(t *testing.T, d *daemon, conv string, req api.CreateSandboxRequest) {
	t.Helper()
	req.Conversation, req.Network = conv, "proxy"
	sb, err := d.Client.CreateSandbox(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	if sb.Network != "proxy" {
		t.Fatalf("created %+v, want network proxy", sb)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".sbx/ca.pem", "content": string(p.ca.PEM())})
	code, out := shellOut(t, d, run.ID, "curl -sS --fail --cacert .sbx/ca.pem "+p.allowed.URL()+"/hello", 120)
	if code != 0 || !strings.Contains(out, "hello") {
		t.Fatalf("the allowed server through the proxy: %s", out)
	}
	code, out = shellOut(t, d, run.ID, "curl -sS --fail-with-body "+strings.Replace(p.not.URL(), "https:", "http:", 1)+"/hello", 120)
	if code == 0 || !strings.Contains(out, "sandboxd: egress to refused.test:") {
		t.Fatalf("the refused server through the proxy: %s", out)
	}
	recs, err := d.Client.Egress(ctx(t), sb.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, denied bool
	for _, r := range recs {
		allowed = allowed || r.Host == "allowed.test" && r.Decision == "allow"
		denied = denied || r.Host == "refused.test" && r.Decision == "deny" && strings.Contains(r.Reason, "refused.test")
	}
	if !allowed || !denied {
		t.Fatalf("records %+v: want allowed.test allowed and refused.test denied", recs)
	}
}

func TestEgressProxyContainerd(t *testing.T) {
	img := containerdImage(t)
	p := newEgressPair(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(p.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "containerd", t.TempDir(), "--config", cfg)
	p.check(t, d, "ctd-egress", api.CreateSandboxRequest{Image: img})
}

// The same pair on Kubernetes: the sandbox pod has no way out but the
// agent's pipe (the exec through the kubelet), to a sandboxd on the host.
func TestEgressProxyKubernetes(t *testing.T) {
	p := newEgressPair(t)
	cfg, _ := kubernetesConfig(t, p.yaml())
	d := startDaemon(t, "kubernetes", t.TempDir(), "--config", cfg)
	p.check(t, d, "k8s-egress-"+fmt.Sprint(time.Now().UnixNano()%1e6), api.CreateSandboxRequest{Resources: &api.Resources{CPUs: 1, MemoryMB: 512}})
}
