package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// agentBin is a built sandbox-agent: supervised exec runs its contain
// command, as the agent in a sandbox does.
var agentBin string

func TestMain(m *testing.M) { sandboxtest.Main(m, "", &agentBin, nil) }

// supervisedPair is an in-process daemon whose exec runs under the built
// agent's supervisor.
func supervisedPair(t *testing.T) *agent.Client {
	t.Helper()
	_, c := startPair(t, daemon.WithSelf(agentBin), daemon.WithSupervisedExec())
	return c
}

// marker is a sleep duration no other process on the machine uses, so the
// processes a test started can be found by their command line.
func marker() string { return strconv.Itoa(800000 + rand.IntN(100000)) }

// withArg lists the processes whose command line has arg as an argument.
func withArg(arg string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i:]), ") Z") {
			continue // a zombie has ended
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitNone waits until no live process has arg, failing after d.
func waitNone(t *testing.T, arg string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := withArg(arg)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v (sleep %s) still run %s after they should have been killed", left, arg, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// escapers starts processes that leave the command's process group and
// parentage every way a shell can: background jobs, setsid, a double fork
// (the daemon's parent exits at once) and a nohup'ed one.
func escapers(m string) string {
	return fmt.Sprintf(`sleep %[1]s &
setsid sleep %[1]s &
(setsid sh -c 'sleep %[1]s & exit 0' &)
nohup sleep %[1]s >/dev/null 2>&1 &
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do setsid sleep %[1]s & done
`, m)
}

const escaperCount = 20

func TestSupervisedTimeoutKillsEscapedProcesses(t *testing.T) {
	c := supervisedPair(t)
	m := marker()
	t.Cleanup(func() { killArg(m) })
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{
		Argv:    []string{"sh", "-c", escapers(m) + "sleep 1; echo started; sleep " + m},
		Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Signal != "KILL" || strings.TrimSpace(string(r.Stdout)) != "started" {
		t.Fatalf("resp = %+v", r)
	}
	// sh, its last sleep and every escaper.
	if r.Killed < escaperCount+2 {
		t.Errorf("killed %d processes, want at least %d", r.Killed, escaperCount+2)
	}
	waitNone(t, m, 5*time.Second)
}

func TestSupervisedExitLeavesBackgroundUntilTimeout(t *testing.T) {
	c := supervisedPair(t)
	m := marker()
	t.Cleanup(func() { killArg(m) })
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{
		Argv:    []string{"sh", "-c", escapers(m) + "sleep 0.5; exit 3"},
		Timeout: 4 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.TimedOut || r.ExitCode != 3 || r.Killed != 0 {
		t.Fatalf("resp = %+v", r)
	}
	if r.Left != escaperCount || len(r.LeftPIDs) != 16 || r.LeftUntil.IsZero() {
		t.Fatalf("left %d (%v) until %v, want %d", r.Left, r.LeftPIDs, r.LeftUntil, escaperCount)
	}
	if n := len(withArg(m)); n != escaperCount {
		t.Fatalf("%d background processes run after the command exited, want %d", n, escaperCount)
	}
	// Killed at the timeout: 4 s after the start, with room for a loaded machine.
	waitNone(t, m, time.Until(r.LeftUntil)+5*time.Second)
	// The exec is forgotten once its supervisor has exited; the next runs.
	if r, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"echo", "ok"}}); err != nil || string(r.Stdout) != "ok\n" {
		t.Fatalf("next exec: %+v %v", r, err)
	}
}

func TestSupervisedStatusAndNoLeftovers(t *testing.T) {
	c := supervisedPair(t)
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 7 || string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" || r.Left != 0 || r.Killed != 0 {
		t.Fatalf("resp = %+v", r)
	}
	r, err = c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "kill -TERM $$"}})
	if err != nil || r.Signal != "TERM" || r.ExitCode != 128+15 {
		t.Fatalf("signalled: %+v %v", r, err)
	}
	r, err = c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("in")})
	if err != nil || string(r.Stdout) != "in" {
		t.Fatalf("stdin: %+v %v", r, err)
	}
	// The supervisor's own signal dispositions are not the command's.
	r, err = c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"}})
	if err != nil || strings.Contains(string(r.Stdout), "1") {
		t.Fatalf("the command starts with signals ignored or blocked: %q %v", r.Stdout, err)
	}
	notExec := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{notExec}}); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a file that is not executable: %v", err)
	}
}

func TestSupervisedClientGoneKillsTree(t *testing.T) {
	c := supervisedPair(t)
	m := marker()
	t.Cleanup(func() { killArg(m) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", escapers(m) + "sleep " + m}})
		errc <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(withArg(m)) < escaperCount+1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of the processes started", len(withArg(m)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Exec returned no error after its context was cancelled")
	}
	waitNone(t, m, 5*time.Second)
}

func TestSupervisedCloseKillsBackground(t *testing.T) {
	srv, c := startPair(t, daemon.WithSelf(agentBin), daemon.WithSupervisedExec())
	m := marker()
	t.Cleanup(func() { killArg(m) })
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", escapers(m) + "sleep 0.5"}, Timeout: time.Hour})
	if err != nil || r.Left != escaperCount {
		t.Fatalf("resp = %+v, %v", r, err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	waitNone(t, m, 5*time.Second)
}

// killArg cleans up after a failed test.
func killArg(arg string) {
	for _, p := range withArg(arg) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
