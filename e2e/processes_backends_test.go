package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// processAndPreview starts the test app as a process of sandbox id, sees it
// listed and its output read, and loads its page through a preview link
// (no token) and its data through the port proxy.
func processAndPreview(t *testing.T, d *daemon, id string) {
	t.Helper()
	src, err := os.ReadFile("testdata/portsrv.py")
	if err != nil {
		t.Fatal(err)
	}
	var p api.Process
	procHTTP(t, d, "POST", "/v1/sandboxes/"+id+"/processes", api.StartProcess{Command: "cat > /tmp/portsrv.py <<'EOF'\n" + string(src) + "\nEOF\necho app-starting; exec python3 -u /tmp/portsrv.py 8790 backend-app"}, &p, http.StatusCreated)
	waitFor(t, 60*time.Second, "the app listens", func() error {
		for _, l := range listPorts(t, d, id) {
			if l.Port == 8790 {
				return nil
			}
		}
		return fmt.Errorf("port 8790 not listed yet")
	})
	var po api.ProcessOutput
	procHTTP(t, d, "GET", "/v1/sandboxes/"+id+"/processes/"+p.ID+"/output?since=0", nil, &po, http.StatusOK)
	if len(po.Chunks) == 0 || !strings.Contains(po.Chunks[0].Text, "app-starting") || po.Process.State != "running" {
		t.Fatalf("the app's output and state: %+v", po)
	}
	pv := createPreview(t, d, id, map[string]any{"port": 8790})
	if code, body := get(t, plain(t, "GET", pv.URL)); code != 200 || !strings.Contains(body, "<title>backend-app</title>") {
		t.Fatalf("the page through the preview link: %d %.200s", code, body)
	}
	if code, body := get(t, authed(t, d, "GET", "/v1/sandboxes/"+id+"/ports/8790/data.json", nil)); code != 200 || !strings.Contains(body, `"mark": "backend-app"`) {
		t.Fatalf("the data through the port proxy: %d %s", code, body)
	}
	procHTTP(t, d, "DELETE", "/v1/sandboxes/"+id+"/processes/"+p.ID, nil, nil, http.StatusNoContent)
}

func TestProcessesAndPreviewContainerd(t *testing.T) {
	img := containerdImage(t)
	d := startDaemon(t, "containerd", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "ctd-procs", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	processAndPreview(t, d, sb.ID)
}

func TestProcessesAndPreviewKubernetes(t *testing.T) {
	cfg, _ := kubernetesConfig(t, "")
	d := startDaemon(t, "kubernetes", t.TempDir(), "--config", cfg)
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "k8s-procs-" + fmt.Sprint(time.Now().UnixNano()%1e6), Resources: &api.Resources{CPUs: 1, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	processAndPreview(t, d, sb.ID)
}

// A process the out-of-memory killer ends in a memory-limited sandbox is
// reported as such, not as an exit.
func TestProcessOOMKilled(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "oom", Image: dockerImage(), Resources: &api.Resources{MemoryMB: 128}})
	if err != nil {
		t.Fatal(err)
	}
	var p api.Process
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "python3 -c 'b = []\nwhile True: b.append(bytearray(16 << 20))'"}, &p, http.StatusCreated)
	waitFor(t, 60*time.Second, "the process to end", func() error {
		procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes/"+p.ID, nil, &p, http.StatusOK)
		if p.State == "running" {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if p.State != "killed" || p.Signal != "KILL" || !p.OOMKilled || p.ExitCode != nil || !strings.Contains(p.Status, "out-of-memory") {
		t.Fatalf("a process over the sandbox's memory: %+v", p)
	}
}
