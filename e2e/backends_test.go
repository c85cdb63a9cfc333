package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// containerdImage skips unless SANDBOXD_TEST_CONTAINERD=1, and makes sure
// containerd has the sandbox image (a second of checks when it has).
func containerdImage(t *testing.T) string {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_CONTAINERD") != "1" {
		t.Skip("set SANDBOXD_TEST_CONTAINERD=1 to run against containerd")
	}
	img := dockerImage()
	ictx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ictx, "../scripts/containerd-import.sh", img).CombinedOutput(); err != nil {
		t.Fatalf("scripts/containerd-import.sh %s: %v\n%s", img, err, out)
	}
	return img
}

// kubernetesConfig skips unless SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG
// name a cluster (scripts/k8s-up.sh), and writes the config of a sandboxd
// on the host using it, with extra appended (more top-level keys). It
// returns the config's path and the kubeconfig.
func kubernetesConfig(t *testing.T, extra string) (cfg, kubeconfig string) {
	t.Helper()
	kubeconfig = os.Getenv("KUBECONFIG")
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || kubeconfig == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG (scripts/k8s-up.sh) to run against a cluster")
	}
	agentImage := os.Getenv("SANDBOXD_TEST_K8S_AGENT_IMAGE")
	if agentImage == "" {
		agentImage = "sandboxd:latest"
	}
	cfg = filepath.Join(t.TempDir(), "config.yaml")
	// The images were imported into the node; a 2-core node holds the pod.
	body := fmt.Sprintf("default_image: %s\nkubernetes:\n  kubeconfig: %s\n  namespace: default\n  agent_image: %s\n  image_pull_policy: Never\n  requests: {cpus: 0.05, memory_mb: 64}\n%s",
		dockerImage(), kubeconfig, agentImage, extra)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, kubeconfig
}
