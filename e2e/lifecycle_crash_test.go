package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/sandbox"
)

// TestLifecycleSurvivesKill9: sandboxd is killed with -9 while it pauses,
// resumes, hibernates, snapshots and forks a sandbox, at several moments
// into each. After the restart the sandbox is in a state it truly has and
// one call makes it answer, with its file intact, and no half-made
// snapshot or sandbox is listed.
func TestLifecycleSurvivesKill9(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "crash", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "shell", map[string]any{"command": "head -c 20000000 /dev/urandom > big.bin; echo kept > note.txt"})
	verbs := []struct {
		name string
		do   func(context.Context) error
	}{
		{"pause", func(c context.Context) error { _, err := d.Client.PauseSandbox(c, sb.ID); return err }},
		{"resume", func(c context.Context) error { _, err := d.Client.ResumeSandbox(c, sb.ID); return err }},
		{"hibernate", func(c context.Context) error { _, err := d.Client.HibernateSandbox(c, sb.ID); return err }},
		{"resume", func(c context.Context) error { _, err := d.Client.ResumeSandbox(c, sb.ID); return err }},
		{"snapshot", func(c context.Context) error { _, err := d.Client.CreateSnapshot(c, sb.ID, "crash"); return err }},
		{"fork", func(c context.Context) error {
			_, err := d.Client.ForkSandbox(c, sb.ID, []string{"crash-copy-" + randomHex(t, 3)})
			return err
		}},
	}
	for _, delay := range []time.Duration{5 * time.Millisecond, 60 * time.Millisecond, 300 * time.Millisecond, 1500 * time.Millisecond} {
		for _, v := range verbs {
			c, cancel := context.WithCancel(ctx(t))
			done := make(chan struct{})
			go func() { defer close(done); _ = v.do(c) }()
			time.Sleep(delay)
			d.kill()
			cancel()
			<-done
			d.start()
			got, err := d.Client.GetSandbox(ctx(t), sb.ID)
			if err != nil {
				t.Fatalf("after a kill -9 %s into %s: %v", delay, v.name, err)
			}
			switch got.State {
			case sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated:
			default:
				t.Fatalf("after a kill -9 %s into %s the sandbox is %s", delay, v.name, got.State)
			}
			if out := mustCall(t, d, run.ID, "read", map[string]any{"path": "note.txt"}); !strings.Contains(out, "kept") {
				t.Fatalf("after a kill -9 %s into %s (state %s) the read answers %q", delay, v.name, got.State, out)
			}
		}
	}
	// Whatever was listed is whole: each snapshot makes a sandbox, each
	// copy answers.
	snaps, err := d.Client.ListSnapshots(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if _, err := d.Client.GetSnapshot(ctx(t), s.ID); err != nil {
			t.Errorf("listed snapshot %s cannot be read: %v", s.ID, err)
		}
	}
	all, err := d.Client.ListSandboxes(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.ID == sb.ID {
			continue
		}
		t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), s.ID) })
		r, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: s.Conversation})
		if err != nil {
			t.Fatal(err)
		}
		if out := mustCall(t, d, r.ID, "read", map[string]any{"path": "note.txt"}); !strings.Contains(out, "kept") {
			t.Errorf("copy %s (%s) reads %q", s.Conversation, s.State, out)
		}
	}
	t.Logf("%d snapshots and %d copies made it whole", len(snaps), len(all)-1)
}
