package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
)

// builtBinaries returns sandboxd and sandbox-agent: the ones make test
// built and names, else fresh builds in a temporary directory.
func builtBinaries(t *testing.T) (sandboxd, agent string) {
	t.Helper()
	sandboxd, agent = os.Getenv("SANDBOXD_BIN"), os.Getenv("SANDBOXD_AGENT_BIN")
	dir := t.TempDir()
	if sandboxd == "" {
		sandboxd = filepath.Join(dir, "sandboxd")
		goBuild(t, sandboxd, ".", false)
	}
	if agent == "" {
		agent = filepath.Join(dir, "sandbox-agent")
		goBuild(t, agent, "../sandbox-agent", true)
	}
	return sandboxd, agent
}

func goBuild(t *testing.T, out, pkg string, static bool) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stderr = os.Stderr
	if static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build %s: %v", pkg, err)
	}
}

// A second SIGTERM ends the process at once, even while the first one's
// graceful shutdown waits for a call in flight: main owns the signals and
// nothing else holds on to them.
func TestSecondSignalEndsTheProcessAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin, agentBin := builtBinaries(t)
	dataDir, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "serve", "--backend", "host", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--agent-binary", agentBin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-exited:
		t.Fatalf("sandboxd exited before serving: %v\n%s", cmd.ProcessState, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("sandboxd did not serve within 60s:\n%s", stderr.String())
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(url, strings.TrimSpace(string(tok)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: "sig", Workspace: &api.Workspace{HostPath: ws}}); err != nil {
		t.Fatal(err)
	}
	run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"command": "touch started; sleep 120", "timeout_s": 120})
	go c.CallTool(ctx, run.ID, "shell", args)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell call did not start within 30s:\n%s", stderr.String())
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatalf("sandboxd ended (%v) at the first SIGTERM instead of waiting for the call in flight", cmd.ProcessState)
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("sandboxd ended with %v after the second SIGTERM, want death by SIGTERM", cmd.ProcessState)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("sandboxd still runs 5s after the second SIGTERM:\n%s", stderr.String())
	}
}
