package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// TestGVisorPauseResumeCycles pauses and resumes a gVisor sandbox through
// the API again and again, each time followed at once by a shell call:
// every call after a resume runs, on the same workspace, in the same
// sandbox, on the pipe that was open before the pause. The sandbox has
// TestGVisorAbuseAndLifecycle's limits: gVisor's own kernel counts in the
// pids limit, and a resume is when it needs the most threads at once.
func TestGVisorPauseResumeCycles(t *testing.T) {
	needGVisor(t)
	d := startDaemon(t, "docker", t.TempDir())
	sb, run := gvisorBox(t, d, "gv-cycles", "gvisor", func(r *api.CreateSandboxRequest) {
		r.Resources = &api.Resources{MemoryMB: 512, Pids: 128}
	})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "kept.txt", "content": "kept\n"})
	const cycles = 20
	for i := range cycles {
		if got, err := d.Client.PauseSandbox(ctx(t), sb.ID); err != nil || got.State != "paused" {
			t.Fatalf("cycle %d: pause: %+v %v", i, got, err)
		}
		if got, err := d.Client.ResumeSandbox(ctx(t), sb.ID); err != nil || got.State != "running" || got.Runtime != "gvisor" {
			t.Fatalf("cycle %d: resume: %+v %v", i, got, err)
		}
		out, err := call(t, d, run.ID, "shell", map[string]any{"command": fmt.Sprintf("cat kept.txt; echo cycle-%d", i)})
		if err != nil || !strings.Contains(out, "kept") || !strings.Contains(out, fmt.Sprintf("cycle-%d", i)) {
			t.Fatalf("cycle %d: the shell call after the resume: %q %v", i, out, err)
		}
	}
	if v, ok := sampleValue(t, scrape(t, d), "sandboxd_agent_reconnects_total", map[string]string{"backend": "docker"}); !ok || v != 0 {
		t.Errorf("agent reconnects over %d pauses = %v (present %v), want 0: the pipe is kept across a pause, and the sandbox never restarted", cycles, v, ok)
	}
}

// TestGVisorRestartUnderThePipe kills a gVisor sandbox's kernel (runsc's
// sandbox process, as when the sandbox reaches a pids or memory limit that
// counts gVisor's own kernel) under a call in flight. runsc often keeps
// the agent pipe's exec stream open with nothing behind it, and sometimes
// ends it; either way the call ends saying the sandbox restarted (not
// "session ended", after the session's keepalive or at once), and the
// next call works on a new pipe with the sandbox's files.
func TestGVisorRestartUnderThePipe(t *testing.T) {
	needGVisor(t)
	d := startDaemon(t, "docker", t.TempDir())
	sb, run := gvisorBox(t, d, "gv-restart", "gvisor")
	mustCall(t, d, run.ID, "write", map[string]any{"path": "kept.txt", "content": "kept\n"})

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := call(t, d, run.ID, "shell", map[string]any{"command": "touch started; sleep 90; echo finished", "timeout_s": 120})
		done <- result{out, err}
	}()
	waitFor(t, 30*time.Second, "the long call to start", func() error {
		return engineQuiet("docker", "exec", "sandboxd-"+sb.ID, "test", "-e", "/workspace/started")
	})
	c, err := dockerClient(t).ContainerInspect(ctx(t), "sandboxd-"+sb.ID)
	if err != nil || c.State == nil || c.State.Pid <= 0 {
		t.Fatalf("inspect the sandbox's container: %+v %v", c.State, err)
	}
	started, restarts := c.State.StartedAt, c.RestartCount
	if err := syscall.Kill(c.State.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill runsc's sandbox process %d: %v", c.State.Pid, err)
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(100 * time.Second):
		t.Fatal("the call in flight did not end within 100 s of the sandbox's kernel dying")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "restarted during this call") || !strings.Contains(r.err.Error(), "gVisor") {
		t.Fatalf("the call in flight as the sandbox died: %q %v; want an error saying the sandbox restarted, naming gVisor's limits", r.out, r.err)
	}
	c, err = dockerClient(t).ContainerInspect(ctx(t), "sandboxd-"+sb.ID)
	if err != nil || c.State.StartedAt == started || c.RestartCount <= restarts {
		t.Fatalf("the engine did not restart the sandbox (started %s, was %s; restarts %d, was %d): %v", c.State.StartedAt, started, c.RestartCount, restarts, err)
	}
	if out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat kept.txt; test -e started && echo marker"}); !strings.Contains(out, "kept") || !strings.Contains(out, "marker") {
		t.Errorf("the call after the restart: %s", out)
	}
}

// engineQuiet runs an engine command and returns its failure, output
// included, for a wait to retry.
func engineQuiet(argv ...string) error {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(c, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return nil
}
