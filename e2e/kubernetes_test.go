package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/api"
)

// TestKubernetesBackend drives the built sandboxd with --backend kubernetes
// (KUBECONFIG; scripts/k8s-up.sh makes a cluster) through the HTTP API:
// create a sandbox pod, use file and shell tools, restart sandboxd and find
// the conversation's sandbox and files again, delete it, and check with the
// API server that no pod is left.
func TestKubernetesBackend(t *testing.T) {
	cfg, kubeconfig := kubernetesConfig(t, "")
	img := dockerImage()
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	d := startDaemon(t, "kubernetes", t.TempDir(), "--config", cfg)
	conv := "k8s:e2e-" + fmt.Sprint(time.Now().UnixNano()%1e6) // ':' is not allowed in a label value
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: conv, Resources: &api.Resources{CPUs: 1, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	if sb.Backend != "kubernetes" || sb.State != "running" || sb.Workspace != "/workspace" || sb.Image != img {
		t.Fatalf("created %+v", sb)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "notes/a.txt", "content": "kept across restarts\n"})
	out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat notes/a.txt; hostname; test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-mounted; cat /proc/1/cmdline | tr '\\0' ' '"})
	for _, want := range []string{"kept across restarts", "sandbox\n", "sandbox-agent init"} {
		if !strings.Contains(out, want) {
			t.Fatalf("shell in the sandbox said %q, want %q in it", out, want)
		}
	}
	if strings.Contains(out, "token-mounted") {
		t.Fatalf("the service-account token is mounted in the sandbox: %q", out)
	}

	d.restart()
	list, err := d.Client.ListSandboxes(ctx(t), conv)
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("after a restart the conversation's sandboxes are %+v, %v; want %s", list, err, sb.ID)
	}
	run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCall(t, d, run2.ID, "read", map[string]any{"path": "notes/a.txt"}); !strings.Contains(out, "kept across restarts") {
		t.Fatalf("after a restart read said %q", out)
	}

	if err := d.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the sandbox pod to be gone", func() error {
		_, err := cs.CoreV1().Pods("default").Get(ctx(t), "sandboxd-"+sb.Deployment+"-"+sb.ID, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("pod sandboxd-%s-%s still exists", sb.Deployment, sb.ID)
		}
		return nil
	})
}
