package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// TestContainerdBackend drives the built sandboxd with --backend containerd
// through the HTTP API: create a sandbox, use file and shell tools, restart
// sandboxd and find the conversation's sandbox and files again, refuse a
// bridge network, delete, and check with ctr that nothing is left.
func TestContainerdBackend(t *testing.T) {
	img := containerdImage(t)

	d := startDaemon(t, "containerd", t.TempDir())
	_, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "ctd-bridge", Image: img, Network: "bridge"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("a bridge sandbox = %v, want invalid_argument saying the backend gives no network", err)
	}

	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "ctd-e2e", Image: img,
		Resources: &api.Resources{CPUs: 1, MemoryMB: 512, Pids: 300}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	if sb.Backend != "containerd" || sb.State != "running" || sb.Workspace != "/workspace" {
		t.Fatalf("created %+v", sb)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "ctd-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "notes/a.txt", "content": "kept across restarts\n"})
	out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat notes/a.txt; echo ifaces=$(ls /sys/class/net | tr '\\n' ,); cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null"})
	for _, want := range []string{"kept across restarts", "ifaces=lo,", "300"} {
		if !strings.Contains(out, want) {
			t.Fatalf("shell in the sandbox said %q, want %q in it", out, want)
		}
	}

	d.restart()
	list, err := d.Client.ListSandboxes(ctx(t), "ctd-e2e")
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("after a restart the conversation's sandboxes = %+v, %v; want %s", list, err, sb.ID)
	}
	run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "ctd-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCall(t, d, run2.ID, "read", map[string]any{"path": "notes/a.txt"}); !strings.Contains(out, "kept across restarts") {
		t.Fatalf("read after a restart = %q", out)
	}

	if err := d.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	ls, err := exec.CommandContext(ctx(t), "ctr", "-n", "sandboxd", "containers", "ls", "-q").Output()
	if err != nil {
		t.Fatalf("ctr containers ls: %v", err)
	}
	if strings.Contains(string(ls), sb.ID) {
		t.Fatalf("containerd still lists sandbox %s after Delete:\n%s", sb.ID, ls)
	}
}
