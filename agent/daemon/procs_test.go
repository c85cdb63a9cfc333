package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitDead fails the test unless pid is gone within d.
func waitDead(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %s", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("read line: %v (got %q)", r.err, r.s)
		}
		return strings.TrimSpace(r.s)
	case <-time.After(10 * time.Second):
		t.Fatal("no line within 10s")
	}
	return ""
}

func TestExecHeadTail(t *testing.T) {
	_, c := startPair(t)
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{
		Argv:     []string{"sh", "-c", `printf START; head -c 100000 /dev/zero | tr '\0' a; printf END; echo oops >&2; exit 3`},
		MaxBytes: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := string(r.Stdout)
	if len(out) != 1000 || !strings.HasPrefix(out, "STARTaaa") || !strings.HasSuffix(out, "aaaEND") {
		t.Fatalf("stdout len %d head %q tail %q", len(out), out[:min(10, len(out))], out[max(0, len(out)-10):])
	}
	if r.StdoutOmitted != 100008-1000 {
		t.Fatalf("omitted %d, want %d", r.StdoutOmitted, 100008-1000)
	}
	if string(r.Stderr) != "oops\n" || r.StderrOmitted != 0 || r.ExitCode != 3 || r.TimedOut {
		t.Fatalf("resp = %+v", r)
	}
}

func TestExecStdinEnvDir(t *testing.T) {
	_, c := startPair(t)
	dir := t.TempDir()
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{
		Argv:  []string{"sh", "-c", `read x; echo "$x $FOO $(pwd)"`},
		Stdin: []byte("hello\n"),
		Env:   map[string]string{"FOO": "bar"},
		Dir:   dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(r.Stdout)), "hello bar "+dir; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	_, err = c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"no-such-program-sandboxd"}})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing program: %v", err)
	}
	_, err = c.Exec(testCtx(t), &proto.ExecRequest{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("empty argv: %v", err)
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	_, c := startPair(t)
	start := time.Now()
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{
		Argv:    []string{"sh", "-c", `sleep 60 & echo $!; wait`},
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Signal != "KILL" {
		t.Fatalf("resp = %+v", r)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("timeout took %s", el)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q: %v", r.Stdout, err)
	}
	waitDead(t, pid, 5*time.Second)
}

func TestExecClientGoneKillsIt(t *testing.T) {
	_, c := startPair(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", `echo $$ > ` + pidFile + `; exec sleep 60`}})
		errc <- err
	}()
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Exec returned no error after its context was cancelled")
	}
	waitDead(t, pid, 5*time.Second)
}

func TestSpawnBackpressureKeepsEveryByte(t *testing.T) {
	_, c := startPair(t, daemon.WithOutputBuffer(4096))
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"seq", "1", "40000"}})
	if err != nil {
		t.Fatal(err)
	}
	// With nobody reading, seq fills the pipe and the buffer and blocks.
	w, err := c.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Running {
		t.Fatalf("seq finished although nobody read its output: %+v", w)
	}
	out, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := exec.Command("seq", "1", "40000").Output()
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d; equal prefix %v", len(got), len(want), bytes.HasPrefix(want, got))
	}
	w, err = c.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second})
	if err != nil || w.Running || w.ExitCode != 0 {
		t.Fatalf("wait = %+v, %v", w, err)
	}
}

func TestAttachReplacesAttacher(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"sh", "-c", `while true; do echo tick; sleep 0.02; done`}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if l := readLine(t, a); l != "tick" {
		t.Fatalf("first attacher read %q", l)
	}
	b, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, a); done <- err }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the replaced attacher's stream was not closed")
	}
	if l := readLine(t, b); l != "tick" {
		t.Fatalf("second attacher read %q", l)
	}
	if err := c.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "TERM", Group: true}); err != nil {
		t.Fatal(err)
	}
}

func TestStdinAttachAndEOF(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Attach(ctx, p.ID, "stdin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if l := readLine(t, out); l != "hello" {
		t.Fatalf("cat echoed %q", l)
	}
	in.Close() // EOF for cat
	w, err := c.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second})
	if err != nil || w.Running || w.ExitCode != 0 {
		t.Fatalf("wait = %+v, %v", w, err)
	}

	q, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Attach(ctx, q.ID, "stdin"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("stdin attach without a pipe: %v", err)
	}
	if _, err := c.Attach(ctx, q.ID, "fd9"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("unknown stream: %v", err)
	}
	if _, err := c.Attach(ctx, "nope", "stdout"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown process: %v", err)
	}
}

func TestExtraPipes(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{
		Argv:       []string{"sh", "-c", `read line <&3; echo "got $line" >&4; echo visible`},
		ExtraPipes: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Attach(ctx, p.ID, "fd3")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Attach(ctx, p.ID, "fd4")
	if err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("x\n"))
	if l := readLine(t, out); l != "got x" {
		t.Fatalf("fd4 = %q", l)
	}
	stdout, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(stdout); string(b) != "visible\n" {
		t.Fatalf("stdout = %q", b)
	}
}

func TestNameConflictListWait(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	labels := map[string]string{"kind": "lsp"}
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Name: "lsp/go", Argv: []string{"sleep", "30"}, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Spawn(ctx, &proto.SpawnRequest{Name: "lsp/go", Argv: []string{"sleep", "30"}})
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), p.ID) {
		t.Fatalf("second spawn: %v", err)
	}
	if _, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	l, err := c.List(ctx, &proto.ListRequest{Labels: labels})
	if err != nil || len(l) != 1 || l[0].ID != p.ID || !l[0].Running || l[0].Name != "lsp/go" {
		t.Fatalf("list = %+v, %v", l, err)
	}
	w, err := c.Wait(ctx, &proto.WaitRequest{ID: p.ID})
	if err != nil || !w.Running {
		t.Fatalf("wait(0) = %+v, %v", w, err)
	}
	if err := c.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "TERM"}); err != nil {
		t.Fatal(err)
	}
	w, err = c.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second})
	if err != nil || w.Running || w.Signal != "TERM" || w.ExitedAt.IsZero() {
		t.Fatalf("wait = %+v, %v", w, err)
	}
	// The exited process stays listed; its name is free again.
	if l, _ := c.List(ctx, nil); len(l) != 2 {
		t.Fatalf("list after exit = %+v", l)
	}
	if _, err := c.Spawn(ctx, &proto.SpawnRequest{Name: "lsp/go", Argv: []string{"true"}}); err != nil {
		t.Fatalf("respawn under the same name: %v", err)
	}
	if err := c.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "BOGUS"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bogus signal: %v", err)
	}
	if err := c.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "TERM"}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("signal to exited process: %v", err)
	}
}

func TestSignalGroupKillsGrandchildren(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"sh", "-c", `sleep 60 & echo $!; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(readLine(t, out))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second})
	if err != nil || w.Running || w.Signal != "KILL" || w.ExitCode != 137 {
		t.Fatalf("wait = %+v, %v", w, err)
	}
	waitDead(t, grandchild, 5*time.Second)
}

func TestProcessSurvivesSessionDrop(t *testing.T) {
	srv, c := startPair(t)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Name: "keeper", Argv: []string{"sh", "-c", "echo hi; sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after Close")
	}
	if _, err := c.List(ctx, nil); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("call on a closed client: %v", err)
	}
	c2 := connect(t, srv)
	l, err := c2.List(ctx, nil)
	if err != nil || len(l) != 1 || l[0].ID != p.ID || !l[0].Running {
		t.Fatalf("list on the new session = %+v, %v", l, err)
	}
	out, err := c2.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if l := readLine(t, out); l != "hi" {
		t.Fatalf("read %q", l)
	}
}

func TestCloseKillsProcessGroups(t *testing.T) {
	srv := daemon.New()
	c := connect(t, srv)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"sh", "-c", `sleep 60 & echo $!; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(readLine(t, out))
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(p.PID) {
		t.Fatalf("leader %d alive after Close", p.PID)
	}
	waitDead(t, grandchild, 5*time.Second)
}

func TestRetentionBoundsExitedProcesses(t *testing.T) {
	_, c := startPair(t, daemon.WithRetention(2, time.Hour))
	ctx := testCtx(t)
	var ids []string
	for i := range 4 {
		p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"sh", "-c", fmt.Sprintf("exit %d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	l, err := c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].ID != ids[2] || l[1].ID != ids[3] || l[1].ExitCode != 3 {
		t.Fatalf("list = %+v, want the last two of %v", l, ids)
	}
	if _, err := c.Wait(ctx, &proto.WaitRequest{ID: ids[0]}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("wait on a pruned process: %v", err)
	}
}

// proto.AgentSelf runs the executable WithSelf names, with the rest of argv.
func TestSpawnAgentSelf(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fake-agent")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"self:$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, c := startPair(t, daemon.WithSelf(script))
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{proto.AgentSelf, "relay", "/tmp/x.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if l := readLine(t, out); l != "self:relay /tmp/x.sock" {
		t.Fatalf("the self spawn printed %q, want the agent run with the rest of argv", l)
	}
}
