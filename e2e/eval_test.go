package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// evalArgs is one eval call.
func evalArgs(lang, code string) map[string]any {
	return map[string]any{"code": code, "description": "an end-to-end eval cell", "language": lang}
}

// TestEvalSurvivesRestart: a variable set in a cell is still there after
// sandboxd restarts, in Python and JavaScript, and tool() works over HTTP.
func TestEvalSurvivesRestart(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := startDaemon(t, backend, t.TempDir())
			sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-eval"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-eval"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(toolNames(run.Tools), "eval") {
				t.Fatalf("run tools %v lack eval", toolNames(run.Tools))
			}
			mustCall(t, d, run.ID, "write", map[string]any{"path": "data.txt", "content": "from the workspace\n"})
			mustCall(t, d, run.ID, "eval", evalArgs("python", "answer = 41\ntext = tool('read', {'path': 'data.txt'})"))
			mustCall(t, d, run.ID, "eval", evalArgs("javascript", "let greeting = 'hello from js'"))

			d.restart()

			run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-eval"})
			if err != nil {
				t.Fatal(err)
			}
			if out := mustCall(t, d, run2.ID, "eval", evalArgs("python", "answer + 1, 'from the workspace' in text")); !strings.Contains(out, "(42, True)") {
				t.Fatalf("python after restart: %q", out)
			}
			if out := mustCall(t, d, run2.ID, "eval", evalArgs("javascript", "greeting")); !strings.Contains(out, "'hello from js'") {
				t.Fatalf("javascript after restart: %q", out)
			}
			// description is required.
			if _, err := call(t, d, run2.ID, "eval", map[string]any{"code": "1"}); err == nil || !strings.Contains(err.Error(), "description") {
				t.Fatalf("a call without description: %v", err)
			}
		})
	}
}

// TestEvalWithoutSandbox: a conversation with no sandbox gets a host kernel
// (and no sandbox is created for it); with eval.host: false it sees no eval.
func TestEvalWithoutSandbox(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, "host", dataDir)
	t.Cleanup(func() { stopHostKernels(t, filepath.Join(dataDir, "host-kernels")) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-nosb"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(run.Tools), "eval") {
		t.Fatalf("run tools %v lack eval", toolNames(run.Tools))
	}
	out := mustCall(t, d, run.ID, "eval", evalArgs("python", "import os\nkept = 7\nos.getcwd()"))
	if !strings.Contains(out, filepath.Join(dataDir, "host-kernels", "work")) {
		t.Fatalf("host kernel runs in %q, want a folder under the data dir", out)
	}
	plan, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-nosb", Surface: "plan"})
	if err != nil || slices.Contains(toolNames(plan.Tools), "eval") {
		t.Fatalf("a plan run sees eval (an exec tool): %v %v", toolNames(plan.Tools), err)
	}
	if sbs, err := d.Client.ListSandboxes(ctx(t), "conv-nosb"); err != nil || len(sbs) != 0 {
		t.Fatalf("eval created a sandbox: %v %v", sbs, err)
	}
	d.restart()
	run2, _ := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-nosb"})
	if out := mustCall(t, d, run2.ID, "eval", evalArgs("python", "kept")); !strings.Contains(out, "7") {
		t.Fatalf("host kernel after restart: %q", out)
	}

	cfg := filepath.Join(t.TempDir(), "sandboxd.yaml")
	if err := os.WriteFile(cfg, []byte("eval:\n  host: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, "host", t.TempDir(), "--config", cfg)
	run3, err := d2.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-off"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(toolNames(run3.Tools), "eval") {
		t.Fatalf("eval listed with eval.host: false and no sandbox: %v", toolNames(run3.Tools))
	}
}

// stopHostKernels kills the host kernels and the host agent daemon that a
// test's sandboxd left running (they are meant to outlive sandboxd).
func stopHostKernels(t *testing.T, root string) {
	la, err := eval.NewLocalAgent(bins.agent, root)
	if err != nil {
		t.Error(err)
		return
	}
	defer la.Close()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := os.Stat(la.Socket()); err != nil {
		return // no daemon was ever started
	}
	ac, err := la.Agent(c)
	if err != nil {
		t.Errorf("cannot reach the host agent to stop it: %v", err)
		return
	}
	procs, _ := ac.List(c, nil)
	for _, p := range procs {
		if p.Running {
			ac.Signal(c, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true})
		}
	}
	h, err := ac.Hello(c)
	if err != nil {
		t.Errorf("host agent hello: %v", err)
		return
	}
	syscall.Kill(h.PID, syscall.SIGTERM)
}
