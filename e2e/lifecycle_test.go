package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/sandbox"
)

// treeSum makes (once) and checksums a tree of 2,000 files in the
// workspace: one line, the digest of every file's digest by path.
const (
	makeTree = `mkdir -p tree && cd tree && for d in $(seq 1 20); do mkdir -p d$d; for f in $(seq 1 100); do head -c $((f * 37)) /dev/urandom > d$d/f$f; done; done; echo made`
	sumTree  = `cd tree && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-64; find . -type f | wc -l`
)

func treeDigest(t *testing.T, d *daemon, run string) string {
	t.Helper()
	out := mustCall(t, d, run, "shell", map[string]any{"command": sumTree})
	m := regexp.MustCompile(`(?m)^([0-9a-f]{64})\s*\n\s*(\d+)\s*$`).FindStringSubmatch(out)
	if m == nil || m[2] != "2000" {
		t.Fatalf("the tree's digest: %q", out)
	}
	return m[1]
}

// TestLifecyclePauseHibernateResume: a Docker sandbox paused and resumed
// 50 times, hibernated and resumed 10 times, its tree of 2,000 files the
// same byte for byte each time; what lives in memory survives a pause, and
// a call to a paused or hibernated sandbox resumes it first.
func TestLifecyclePauseHibernateResume(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "life", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "life"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "shell", map[string]any{"command": makeTree, "timeout_s": 120})
	want := treeDigest(t, d, run.ID)
	mustCall(t, d, run.ID, "write", map[string]any{"path": "note.txt", "content": "kept through pauses"})
	mustCall(t, d, run.ID, "eval", evalArgs("python", "import os; kept = 41 + 1; kpid = os.getpid()"))
	ticker := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(mustCall(t, d, run.ID, "process", map[string]any{"action": "start", "command": "i=0; while :; do i=$((i+1)); echo t$i; sleep 0.2; done"}))
	if ticker == nil {
		t.Fatal("the ticker did not start")
	}

	for i := range 50 {
		got, err := d.Client.PauseSandbox(ctx(t), sb.ID)
		if err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if got.State != sandbox.StatePaused || got.StateSince == nil || time.Since(*got.StateSince) > time.Minute {
			t.Fatalf("pause %d answered %+v", i, got)
		}
		if again, err := d.Client.PauseSandbox(ctx(t), sb.ID); err != nil || again.State != sandbox.StatePaused {
			t.Fatalf("a second pause is not a no-op: %+v %v", again, err)
		}
		if g, _ := d.Client.GetSandbox(ctx(t), sb.ID); g.State != sandbox.StatePaused {
			t.Fatalf("GET of a paused sandbox says %q", g.State)
		}
		if i%2 == 0 {
			if got, err = d.Client.ResumeSandbox(ctx(t), sb.ID); err != nil || got.State != sandbox.StateRunning {
				t.Fatalf("resume %d: %+v %v", i, got, err)
			}
		} // else the digest's call resumes it
		if i%10 == 0 || i == 49 {
			if got := treeDigest(t, d, run.ID); got != want {
				t.Fatalf("after pause %d the tree's digest is %s, was %s", i, got, want)
			}
		} else {
			if got := mustCall(t, d, run.ID, "read", map[string]any{"path": "note.txt"}); !strings.Contains(got, "kept through pauses") {
				t.Fatalf("read after pause %d: %q", i, got)
			}
		}
	}
	out := mustCall(t, d, run.ID, "eval", evalArgs("python", "(kept, kpid == os.getpid())"))
	if !strings.Contains(out, "(42, True)") {
		t.Fatalf("after 50 pauses the kernel says %q; want its variable in the same process", out)
	}
	if got := mustCall(t, d, run.ID, "process", map[string]any{"action": "list"}); !regexp.MustCompile(ticker[1] + `\s+running`).MatchString(got) {
		t.Fatalf("after 50 pauses the ticker is not running: %s", got)
	}

	for i := range 10 {
		got, err := d.Client.HibernateSandbox(ctx(t), sb.ID)
		if err != nil {
			t.Fatalf("hibernate %d: %v", i, err)
		}
		if got.State != sandbox.StateHibernated || got.StateSince == nil {
			t.Fatalf("hibernate %d answered %+v", i, got)
		}
		if again, err := d.Client.HibernateSandbox(ctx(t), sb.ID); err != nil || again.State != sandbox.StateHibernated {
			t.Fatalf("a second hibernate is not a no-op: %+v %v", again, err)
		}
		if i == 0 {
			// sandboxd restarted while it sleeps reads the state from the engine.
			d.restart()
			if g, err := d.Client.GetSandbox(ctx(t), sb.ID); err != nil || g.State != sandbox.StateHibernated {
				t.Fatalf("after a restart GET says %+v %v", g, err)
			}
		}
		if i%2 == 0 {
			if got, err = d.Client.ResumeSandbox(ctx(t), sb.ID); err != nil || got.State != sandbox.StateRunning {
				t.Fatalf("resume %d: %+v %v", i, got, err)
			}
		}
		if got := treeDigest(t, d, run.ID); got != want {
			t.Fatalf("after hibernation %d the tree's digest is %s, was %s", i, got, want)
		}
	}
	// What did not survive is said where it matters.
	got, err := call(t, d, run.ID, "eval", evalArgs("python", "kept"))
	if err != nil {
		got += err.Error()
	}
	if !strings.Contains(got, "stopped when the sandbox hibernated") {
		t.Fatalf("the first cell after the hibernations: %q; want that the kernel was stopped by the hibernation", got)
	}
	if got := mustCall(t, d, run.ID, "eval", evalArgs("python", "6 * 7")); !strings.Contains(got, "42") {
		t.Fatalf("a new cell after the hibernations: %q", got)
	}
	if got := mustCall(t, d, run.ID, "process", map[string]any{"action": "list"}); !regexp.MustCompile(ticker[1] + `\s+stopped by hibernation`).MatchString(got) {
		t.Fatalf("after the hibernations the ticker is listed as %q; want stopped by hibernation", got)
	}
}

// TestLifecycleIdle: a sandbox created with pause_after_s 2 is paused
// after 2 s without a call, the next read resumes it and answers, and one
// with delete_after_s is deleted; a config default applies to a sandbox
// created without a lifecycle.
func TestLifecycleIdle(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sandboxd.yaml")
	os.WriteFile(cfg, []byte("lifecycle: {hibernate_after: 3s}\n"), 0o600)
	d := startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", cfg)

	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "idle", Image: dockerImage(), Lifecycle: &api.Lifecycle{PauseAfterS: 2, HibernateAfterS: 3600}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Lifecycle == nil || sb.Lifecycle.PauseAfterS != 2 || sb.Lifecycle.HibernateAfterS != 3600 {
		t.Fatalf("the created sandbox's lifecycle: %+v", sb.Lifecycle)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "note.txt", "content": "still here"})
	waitFor(t, 20*time.Second, "the idle sandbox paused", func() error {
		g, err := d.Client.GetSandbox(ctx(t), sb.ID)
		if err == nil && g.State != sandbox.StatePaused {
			err = fmt.Errorf("state %s", g.State)
		}
		return err
	})
	if got := mustCall(t, d, run.ID, "read", map[string]any{"path": "note.txt"}); !strings.Contains(got, "still here") {
		t.Fatalf("the read that resumed it: %q", got)
	}
	if g, _ := d.Client.GetSandbox(ctx(t), sb.ID); g.State != sandbox.StateRunning {
		t.Fatalf("after the read the sandbox is %s", g.State)
	}

	// A process printing output keeps its sandbox awake; once it ends the
	// sandbox sleeps.
	printer := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(mustCall(t, d, run.ID, "process", map[string]any{"action": "start", "command": "for i in $(seq 1 12); do echo tick $i; sleep 0.5; done"}))
	if printer == nil {
		t.Fatal("the printer did not start")
	}
	time.Sleep(5 * time.Second)
	if g, _ := d.Client.GetSandbox(ctx(t), sb.ID); g.State != sandbox.StateRunning {
		t.Fatalf("a sandbox whose process prints every 0.5 s is %s after 5 s without a call; want running", g.State)
	}
	waitFor(t, 20*time.Second, "the sandbox paused after its printer ended", func() error {
		g, err := d.Client.GetSandbox(ctx(t), sb.ID)
		if err == nil && g.State != sandbox.StatePaused {
			err = fmt.Errorf("state %s", g.State)
		}
		return err
	})

	// The config's default: hibernated after 3 s.
	other, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "idle-default", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	if other.Lifecycle == nil || other.Lifecycle.HibernateAfterS != 3 {
		t.Fatalf("the config default's lifecycle: %+v", other.Lifecycle)
	}
	waitFor(t, 30*time.Second, "the default-lifecycle sandbox hibernated", func() error {
		g, err := d.Client.GetSandbox(ctx(t), other.ID)
		if err == nil && g.State != sandbox.StateHibernated {
			err = fmt.Errorf("state %s", g.State)
		}
		return err
	})

	// delete_after_s removes it.
	gone, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "idle-delete", Image: dockerImage(), Lifecycle: &api.Lifecycle{DeleteAfterS: 2}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the idle sandbox deleted", func() error {
		if _, err := d.Client.GetSandbox(ctx(t), gone.ID); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})

	// Bad input: one sentence.
	_, err = d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "idle-bad", Image: dockerImage(), Lifecycle: &api.Lifecycle{PauseAfterS: -1}})
	if err == nil || !strings.Contains(err.Error(), "lifecycle.pause_after_s") {
		t.Fatalf("a negative pause_after_s: %v", err)
	}
}
