package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// startedExec runs a command on c that writes its pid to a file and sleeps,
// and returns that pid once it runs and a channel with the exec's outcome.
func startedExec(t *testing.T, c *agent.Client) (int, <-chan error) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 30"}})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid, done
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec did not start within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantSuperseded(t *testing.T, err error, what string, parts ...string) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("%s = %v, want failed_precondition", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s = %q, want it to say %q", what, err, p)
		}
	}
}

// A higher claim closes the session of the lower one, with its running
// requests ended by the time the claim gets its response; lower or rival claims
// are refused, also by a daemon restarted on the same state dir; a session
// that never claimed keeps working throughout.
func TestClaimFencesOlderReplicas(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	srv := daemon.New(daemon.WithStateDir(state))
	closed := false
	t.Cleanup(func() {
		if !closed {
			srv.Close()
		}
	})
	ctx := testCtx(t)
	old, next, unclaimed := connect(t, srv), connect(t, srv), connect(t, srv)

	if err := old.Claim(ctx, "replica-0", 1); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := old.Claim(ctx, "replica-0", 1); err != nil {
		t.Fatalf("the same claim again: %v", err)
	}
	pid, execDone := startedExec(t, old)

	if err := next.Claim(ctx, "replica-1", 2); err != nil {
		t.Fatalf("higher claim: %v", err)
	}
	// When the claim gets its response, the old owner's command is gone...
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the superseded session's command (pid %d) still exists after the claim: kill 0 = %v", pid, err)
	}
	select {
	case err := <-execDone:
		if err == nil {
			t.Error("the superseded session's exec succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the superseded session's exec did not fail")
	}
	// ...its session is closed, and nothing more runs on it.
	select {
	case <-old.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the superseded session is still open")
	}
	if _, err := old.Hello(ctx); err == nil {
		t.Fatal("a request on the superseded session succeeded")
	}

	late := connect(t, srv)
	wantSuperseded(t, late.Claim(ctx, "replica-0", 1), "a claim of epoch 1 after 2",
		"claimed by replica-1 at epoch 2", "epoch 1", "stand down")
	wantSuperseded(t, late.Claim(ctx, "replica-9", 2), "a rival claim of the same epoch", "replica-9", "same epoch")
	if _, err := late.Hello(ctx); err != nil {
		t.Fatalf("a refused claim closed its session: %v", err)
	}
	if err := late.Claim(ctx, "replica-1", 2); err != nil {
		t.Fatalf("a second session of the owner at its epoch: %v", err)
	}
	if _, err := next.Hello(ctx); err != nil {
		t.Fatalf("the owner's first session was closed by its second at the same epoch: %v", err)
	}

	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("hi"), 0o644)
	if r, err := unclaimed.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "a.txt"}); err != nil || string(r.Data) != "hi" {
		t.Fatalf("the unclaimed session after the claims: %+v, %v", r, err)
	}

	// A restarted daemon remembers the highest claim.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	srv2 := daemon.New(daemon.WithStateDir(state))
	t.Cleanup(func() { srv2.Close() })
	again := connect(t, srv2)
	wantSuperseded(t, again.Claim(ctx, "replica-0", 1), "a claim of epoch 1 after a restart", "claimed by replica-1 at epoch 2")
	if err := again.Claim(ctx, "replica-2", 3); err != nil {
		t.Fatalf("a higher claim after the restart: %v", err)
	}
}

// Without a state dir the claim lives in memory; a record that cannot be
// read refuses every claim rather than forget who owns the sandbox.
func TestClaimRecord(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	if err := c.Claim(ctx, "replica-0", 0); err != nil {
		t.Fatalf("claim of epoch 0 on a daemon without state dir: %v", err)
	}
	if err := c.Claim(ctx, "", 1); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("claim without holder = %v, want invalid_argument", err)
	}

	state := t.TempDir()
	os.WriteFile(filepath.Join(state, "fence.json"), []byte("{not json"), 0o600)
	_, c2 := startPair(t, daemon.WithStateDir(state))
	err := c2.Claim(ctx, "replica-0", 5)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "fencing record") {
		t.Fatalf("claim with an unreadable record = %v, want unavailable naming the record", err)
	}
}
