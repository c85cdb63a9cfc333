package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// TestContainerdGVisor drives sandboxd --backend containerd through the API
// with a gVisor sandbox next to a runc one: GET says which runtime each has
// (after a restart too), the tools run on gVisor's kernel in one and the
// host's in the other, the gVisor one pauses, hibernates and resumes with
// its files, and once deleted containerd and the host hold nothing of it.
func TestContainerdGVisor(t *testing.T) {
	img := containerdImage(t)
	if _, err := exec.LookPath("runsc"); err != nil {
		t.Skip("runsc is not installed (apt-get install runsc)")
	}
	d := startDaemon(t, "containerd", t.TempDir())
	_, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "ctd-gv-bridge", Image: img, Runtime: "gvisor", Network: "bridge"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("a gVisor sandbox with network bridge = %v, want invalid_argument saying the backend gives no network", err)
	}
	gv, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "ctd-gv", Image: img, Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), gv.ID) })
	rc, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "ctd-rc", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), rc.ID) })
	if gv.Runtime != "gvisor" || rc.Runtime != "runc" {
		t.Fatalf("created runtimes %q and %q, want gvisor and runc", gv.Runtime, rc.Runtime)
	}
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	kernel := "uname -r; dmesg 2>/dev/null | head -n 1"
	runOf := func(conv string) string {
		t.Helper()
		run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	gvRun, rcRun := runOf("ctd-gv"), runOf("ctd-rc")
	checkGVisor := func(when string) {
		t.Helper()
		out := mustCall(t, d, gvRun, "shell", map[string]any{"command": kernel})
		if !strings.Contains(out, "gVisor") || strings.Contains(out, strings.TrimSpace(string(host))) {
			t.Fatalf("%s the gVisor sandbox says %q; want gVisor's kernel, not the host's %s", when, out, host)
		}
	}
	checkGVisor("at first")
	if out := mustCall(t, d, rcRun, "shell", map[string]any{"command": kernel}); !strings.Contains(out, strings.TrimSpace(string(host))) || strings.Contains(out, "gVisor") {
		t.Fatalf("the runc sandbox says %q; want the host's kernel %s", out, host)
	}
	mustCall(t, d, gvRun, "write", map[string]any{"path": "notes/kept.txt", "content": "kept\n"})
	mustCall(t, d, gvRun, "shell", map[string]any{"command": "echo own > /root/own.txt"})
	kept := func(when string) {
		t.Helper()
		if out := mustCall(t, d, gvRun, "shell", map[string]any{"command": "cat notes/kept.txt /root/own.txt"}); !strings.Contains(out, "kept") || !strings.Contains(out, "own") {
			t.Fatalf("%s the gVisor sandbox's files read %q", when, out)
		}
	}

	for _, step := range []struct {
		name  string
		do    func() (api.Sandbox, error)
		state string
	}{
		{"pause", func() (api.Sandbox, error) { return d.Client.PauseSandbox(ctx(t), gv.ID) }, "paused"},
		{"resume", func() (api.Sandbox, error) { return d.Client.ResumeSandbox(ctx(t), gv.ID) }, "running"},
		{"hibernate", func() (api.Sandbox, error) { return d.Client.HibernateSandbox(ctx(t), gv.ID) }, "hibernated"},
		{"resume", func() (api.Sandbox, error) { return d.Client.ResumeSandbox(ctx(t), gv.ID) }, "running"},
	} {
		got, err := step.do()
		if err != nil || got.State != step.state || got.Runtime != "gvisor" {
			t.Fatalf("%s: %s, runtime %q, %v; want %s under gvisor", step.name, got.State, got.Runtime, err, step.state)
		}
	}
	kept("after pause and hibernation")
	checkGVisor("after the hibernation")

	d.restart()
	if got, err := d.Client.GetSandbox(ctx(t), gv.ID); err != nil || got.Runtime != "gvisor" {
		t.Fatalf("after a restart GET says runtime %q, %v; want gvisor", got.Runtime, err)
	}
	gvRun = runOf("ctd-gv")
	kept("after a restart")

	if err := d.Client.DeleteSandbox(ctx(t), gv.ID); err != nil {
		t.Fatal(err)
	}
	ls, err := exec.CommandContext(ctx(t), "ctr", "-n", "sandboxd", "containers", "ls", "-q").Output()
	if err != nil {
		t.Fatalf("ctr containers ls: %v", err)
	}
	if strings.Contains(string(ls), gv.ID) {
		t.Fatalf("containerd still lists sandbox %s after Delete:\n%s", gv.ID, ls)
	}
	// No runsc (sandbox, gofer) nor shim of it is left on the host; the
	// shim exits a moment after its task is deleted.
	waitFor(t, 15*time.Second, "the deleted gVisor sandbox's processes to end", func() error {
		if out, err := exec.CommandContext(ctx(t), "pgrep", "-af", "sandboxd-"+gv.ID).Output(); err == nil {
			return fmt.Errorf("still running:\n%s", out)
		}
		return nil
	})
}
