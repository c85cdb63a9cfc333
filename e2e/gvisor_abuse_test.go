package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// TestGVisorAbuseAndLifecycle runs the fault and abuse checks of the runc
// suites in a gVisor sandbox — path tricks, a FIFO, a fork storm against
// the pids limit, a memory hog — then pauses, hibernates, resumes and
// forks it: the runtime stays gVisor throughout (hibernation is refused).
func TestGVisorAbuseAndLifecycle(t *testing.T) {
	needGVisor(t)
	d := startDaemon(t, "docker", t.TempDir())
	sb, run := gvisorBox(t, d, "gv-abuse", "gvisor", func(r *api.CreateSandboxRequest) {
		r.Resources = &api.Resources{MemoryMB: 512, Pids: 128}
	})

	t.Run("path tricks", func(t *testing.T) {
		if code, out := shellOut(t, d, run.ID, "ln -s / root-link && ln -s /etc/passwd pw", 30); code != 0 {
			t.Fatalf("symlinks: %s", out)
		}
		for _, args := range []map[string]any{
			{"path": "../../etc/passwd"}, {"path": "/etc/passwd"}, {"path": "root-link/etc/passwd"}, {"path": "pw"},
		} {
			if out, err := call(t, d, run.ID, "read", args); err == nil {
				t.Errorf("read %v answered: %.200s", args, out)
			}
		}
		if _, err := call(t, d, run.ID, "write", map[string]any{"path": "root-link/tmp/escaped", "content": "x"}); err == nil {
			t.Error("a write through a symlink to / was answered")
		}
		if code, out := shellOut(t, d, run.ID, "test -e /tmp/escaped && echo escaped || echo kept", 30); code != 0 || !strings.Contains(out, "kept") {
			t.Errorf("a write through the symlink landed: %s", out)
		}
	})
	t.Run("FIFO", func(t *testing.T) {
		if code, out := shellOut(t, d, run.ID, "mkfifo pipe", 30); code != 0 {
			t.Fatalf("mkfifo: %s", out)
		}
		if _, err := call(t, d, run.ID, "read", map[string]any{"path": "pipe"}); err == nil || !strings.Contains(err.Error(), "named pipe (FIFO)") {
			t.Errorf("read of a FIFO: %v, want a sentence naming the FIFO", err)
		}
	})
	t.Run("fork storm", func(t *testing.T) {
		// 300 sleepers against a limit of 128: the limit refuses the rest,
		// and the sandbox still answers.
		_, out := shellOut(t, d, run.ID, "n=0; for i in $(seq 300); do sleep 60 2>/dev/null & n=$((n+1)); done 2>/dev/null; echo started=$(jobs -p | wc -l); kill $(jobs -p) 2>/dev/null; true", 60)
		t.Logf("fork storm: %s", out)
		if strings.Contains(out, "started=300") {
			t.Errorf("300 processes started in a sandbox limited to 128: %s", out)
		}
		// Under gVisor the pids limit counts gVisor's own host threads
		// too, so the storm may take the whole sandbox down; the engine
		// then starts it again (restart policy) with its files.
		waitFor(t, 60*time.Second, "the sandbox answers after the storm", func() error {
			out, err := call(t, d, run.ID, "shell", map[string]any{"command": "echo alive"})
			if err != nil || !strings.Contains(out, "alive") {
				return fmt.Errorf("%q %v", out, err)
			}
			return nil
		})
	})
	t.Run("memory hog", func(t *testing.T) {
		var p api.Process
		procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "python3 -c 'b = []\nwhile True: b.append(bytearray(16 << 20))'"}, &p, http.StatusCreated)
		waitFor(t, 90*time.Second, "the hog to end", func() error {
			var q api.Process
			code, body := do(t, authed(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes/"+p.ID, nil))
			if code == http.StatusOK {
				if err := json.Unmarshal(body, &q); err != nil {
					return err
				}
				if q.State == "running" {
					return fmt.Errorf("still running")
				}
				p = q
				return nil
			}
			if code == http.StatusNotFound {
				// The host's OOM killer took gVisor's kernel, the whole
				// sandbox, which the engine started again: its process
				// table is new.
				p.State, p.Status = "gone", "the sandbox was restarted"
				return nil
			}
			return fmt.Errorf("GET the process: %d %s", code, body)
		})
		t.Logf("the hog ended: state %s, signal %s, oom %v, status %q", p.State, p.Signal, p.OOMKilled, p.Status)
		if p.State == "running" {
			t.Errorf("a process over the sandbox's memory still runs: %+v", p)
		}
		waitFor(t, 60*time.Second, "the sandbox answers after the hog", func() error {
			out, err := call(t, d, run.ID, "shell", map[string]any{"command": "echo alive"})
			if err != nil || !strings.Contains(out, "alive") {
				return fmt.Errorf("%q %v", out, err)
			}
			return nil
		})
	})
	t.Run("pause, hibernate, resume, fork", func(t *testing.T) {
		mustCall(t, d, run.ID, "write", map[string]any{"path": "kept.txt", "content": "kept\n"})
		if got, err := d.Client.PauseSandbox(ctx(t), sb.ID); err != nil || got.State != "paused" || got.Runtime != "gvisor" {
			t.Fatalf("pause: %+v %v", got, err)
		}
		if got, err := d.Client.ResumeSandbox(ctx(t), sb.ID); err != nil || got.State != "running" || got.Runtime != "gvisor" {
			t.Fatalf("resume from pause: %+v %v", got, err)
		}
		// This engine's runsc cannot take the restart-policy update that
		// hibernation starts with: refused in a sentence, sandbox intact.
		if _, err := d.Client.HibernateSandbox(ctx(t), sb.ID); err == nil || !strings.Contains(err.Error(), "runs under gVisor, which this engine cannot hibernate") {
			t.Fatalf("hibernate of a gVisor sandbox: %v, want a refusal naming gVisor", err)
		}
		if out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat kept.txt; dmesg | head -n 1"}); !strings.Contains(out, "kept") || !strings.Contains(out, "gVisor") {
			t.Errorf("after pause and the refused hibernation: %s", out)
		}
		fork, err := d.Client.ForkSandbox(ctx(t), sb.ID, []string{"gv-abuse-copy"})
		if err != nil || len(fork.Sandboxes) != 1 {
			t.Fatalf("fork: %+v %v", fork, err)
		}
		t.Cleanup(func() {
			d.Client.DeleteSandbox(ctx(t), fork.Sandboxes[0].ID)
			d.Client.DeleteSnapshot(ctx(t), fork.Snapshot.ID)
		})
		if fork.Sandboxes[0].Runtime != "gvisor" {
			t.Errorf("the fork's copy has runtime %q, want gvisor", fork.Sandboxes[0].Runtime)
		}
	})
}
