package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// TestHibernatedAgentReportsWhatStopped: a Docker sandbox whose agent gets
// the hibernation signal records its processes, stops them and exits with
// the hibernation's status (75); started again (docker start, the same
// container and file system), its agent reports through sandboxd that the
// process was stopped by the hibernation (tool and HTTP), the next eval
// says the kernel was stopped and its variables are gone without running
// the cell, and a cell after that works in a new kernel.
func TestHibernatedAgentReportsWhatStopped(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	d := startDaemon(t, "docker", filepath.Join(t.TempDir(), "data"))
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "hib-agent", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "hib-agent"})
	if err != nil {
		t.Fatal(err)
	}
	out := mustCall(t, d, run.ID, "process", map[string]any{"action": "start", "command": "echo awake before the sleep; exec sleep 600"})
	m := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no process id in %q", out)
	}
	proc := m[1]
	waitFor(t, 10*time.Second, "the process printed", func() error {
		if o := mustCall(t, d, run.ID, "process", map[string]any{"action": "output", "id": proc, "since": 0}); !strings.Contains(o, "awake before the sleep") {
			return fmt.Errorf("output: %s", o)
		}
		return nil
	})
	mustCall(t, d, run.ID, "eval", evalArgs("python", "kept = 41"))

	name := "sandboxd-" + sb.ID
	engine(t, "docker", "kill", "--signal", "SIGPWR", name)
	var state string
	waitFor(t, 30*time.Second, "the container exits after the hibernation signal", func() error {
		o, err := exec.Command("docker", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name).Output()
		if err != nil {
			return err
		}
		state = strings.TrimSpace(string(o))
		if !strings.HasPrefix(state, "exited ") {
			return fmt.Errorf("container is %s", state)
		}
		return nil
	})
	if state != "exited 75" {
		t.Fatalf("after the hibernation signal the container is %q; want exited with status 75", state)
	}
	engine(t, "docker", "start", name)

	// sandboxd learns that the container runs again at its next refresh
	// or call: the first calls may say it is stopped. They are retried,
	// bounded, and the answers are logged.
	var list string
	tries := 0
	waitFor(t, 60*time.Second, "sandboxd reaches the started sandbox", func() error {
		tries++
		l, err := call(t, d, run.ID, "process", map[string]any{"action": "list"})
		if err != nil {
			t.Logf("process list after the start (try %d): %v", tries, err)
			return err
		}
		list = l
		return nil
	})
	t.Logf("process list after the wake (try %d):\n%s", tries, list)
	if !regexp.MustCompile(`(?m)^` + proc + `\s+stopped by hibernation\s`).MatchString(list) {
		t.Fatalf("process list after the wake:\n%s\nwant %s stopped by hibernation", list, proc)
	}
	var ps []api.Process
	procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes", nil, &ps, 200)
	found := false
	for _, p := range ps {
		if p.ID == proc {
			found = true
			if p.State != "stopped" || p.Status != "stopped by hibernation" || p.ExitCode != nil || p.Signal != "" || p.ExitedAt == nil {
				t.Errorf("GET processes after the wake: %+v; want state stopped, status \"stopped by hibernation\", no exit code or signal", p)
			}
		}
	}
	if !found {
		t.Errorf("GET processes after the wake does not list %s: %+v", proc, ps)
	}
	if o := mustCall(t, d, run.ID, "process", map[string]any{"action": "output", "id": proc, "since": 0}); !strings.Contains(o, "awake before the sleep") {
		t.Errorf("the stopped process's output after the wake: %s", o)
	}

	msg, err := call(t, d, run.ID, "eval", evalArgs("python", "open('rerun.txt', 'w').write('ran')"))
	if err == nil || !strings.Contains(msg+err.Error(), "the kernel was stopped when the sandbox hibernated: its variables are gone; a new kernel is ready") ||
		!strings.Contains(msg+err.Error(), "This cell was not run") {
		t.Fatalf("the first eval after the wake: %q, %v; want that the kernel was stopped by the hibernation and the cell not run", msg, err)
	}
	t.Logf("the first eval after the wake: %v", err)
	if _, err := call(t, d, run.ID, "read", map[string]any{"path": "rerun.txt"}); err == nil {
		t.Fatal("the cell ran although the kernel was stopped by the hibernation")
	}
	if o, err := call(t, d, run.ID, "eval", evalArgs("python", "kept")); err == nil || !strings.Contains(err.Error(), "NameError") {
		t.Fatalf("the variable in the new kernel: %q, %v; want a NameError", o, err)
	}
	if o := mustCall(t, d, run.ID, "eval", evalArgs("python", "kept = 1\nkept + 1")); !strings.Contains(o, "2") {
		t.Fatalf("a cell in the new kernel: %q", o)
	}
	started := mustCall(t, d, run.ID, "process", map[string]any{"action": "start", "command": "sleep 600"})
	if m := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(started); m == nil || m[1] == proc {
		t.Fatalf("a process started after the wake: %q; want a new id, not %s", started, proc)
	}
}
