package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"

	chart "github.com/sandboxd/sandboxd/helm/sandboxd"
)

func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" + server + "\", insecure-skip-tls-verify: true}\n" +
		"users:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeHelm is Helm's client over releases kept in memory and a cluster
// (of the version scripts/k8s-up.sh builds) that accepts every object.
func fakeHelm() *action.Configuration {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	return &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: caps,
		Log:          func(string, ...any) {},
	}
}

// A first deploy installs; the next upgrades the same release with exactly
// its own values (a fresh token, another replica count), none carried over.
func TestInstallThenUpgrade(t *testing.T) {
	cfg := fakeHelm()
	chrt, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	o := deployOptions(t, "--replicas", "3")
	first, err := chartValues(o, "https://127.0.0.1:16443", "first-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	first["podAnnotations"] = map[string]any{"only": "first"}
	ctx := context.Background()
	rel, err := installOrUpgrade(ctx, cfg, chrt, "sandboxd", "sandboxd-replicas", first, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 1 || !strings.Contains(rel.Manifest, "kind: StatefulSet") {
		t.Fatalf("install gave revision %d, manifest with a StatefulSet %v", rel.Version, strings.Contains(rel.Manifest, "kind: StatefulSet"))
	}

	o.replicas = 2
	second, err := chartValues(o, "https://127.0.0.1:16443", "second-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	rel, err = installOrUpgrade(ctx, cfg, chrt, "sandboxd", "sandboxd-replicas", second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 2 || rel.Config["replicaCount"] != 2 {
		t.Errorf("upgrade gave revision %d with replicaCount %v, want 2 and 2", rel.Version, rel.Config["replicaCount"])
	}
	if strings.Contains(rel.Manifest, "first-token") || !strings.Contains(rel.Manifest, "second-token") {
		t.Error("the upgrade's Secret does not carry the new token only")
	}
	if _, ok := rel.Config["podAnnotations"]; ok || strings.Contains(rel.Manifest, "only: first") {
		t.Error("the upgrade reused a value of the first deploy")
	}

	removed, err := uninstall(cfg, "sandboxd", time.Minute)
	if err != nil || !removed {
		t.Fatalf("uninstall = %v, %v; want the release removed", removed, err)
	}
	if removed, err := uninstall(cfg, "sandboxd", time.Minute); err != nil || removed {
		t.Errorf("uninstall of a release that is gone = %v, %v; want nothing to do and no error", removed, err)
	}
}
