package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// startInit runs `sandbox-agent init` on sock (its state dir beside it, as
// in a sandbox) and waits until it listens.
func startInit(t *testing.T, sock string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "init", "--socket", sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitListening(t, sock)
	return cmd
}

// attachInit attaches to the init on sock and checks that it is cmd.
func attachInit(t *testing.T, sock string, cmd *exec.Cmd) *agent.Client {
	t.Helper()
	a := startAttach(t, sock)
	if h, err := a.client.Hello(ctxT(t)); err != nil || h.PID != cmd.Process.Pid {
		t.Fatalf("hello = %+v, %v; want init's pid %d", h, err, cmd.Process.Pid)
	}
	return a.client
}

// The hibernation signal makes init record what runs, kill it and exit
// with the hibernation's status; the init started next on the same files
// reports those processes as stopped by the hibernation, once.
func TestInitHibernates(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := startInit(t, sock)
	c := attachInit(t, sock, cmd)
	p, err := c.ProcStart(ctxT(t), &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo before the sleep; exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"sandboxd.kernel": "python"}
	k, err := c.Spawn(ctxT(t), &proto.SpawnRequest{Argv: []string{"sleep", "600"}, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pi, err := c.ProcGet(ctxT(t), p.ID, 0); err != nil || pi.Output > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process printed nothing in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	cmd.Process.Signal(proto.SignalHibernate)
	err = waitWithin(t, cmd, 20*time.Second, "init did not exit within 20 s of the hibernation signal")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != proto.ExitHibernated {
		t.Fatalf("init exited with %v after the hibernation signal, want status %d", err, proto.ExitHibernated)
	}
	for _, pid := range []int{p.PID, k.PID} {
		if alive(pid) {
			t.Fatalf("process %d outlived the hibernation", pid)
		}
	}

	cmd2 := startInit(t, sock)
	c2 := attachInit(t, sock, cmd2)
	ps, err := c2.ProcList(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ID != p.ID || ps[0].State != proto.ProcStopped || !ps[0].Hibernated || ps[0].ExitCode != nil || ps[0].Signal != "" {
		t.Fatalf("after the wake: %+v; want %s stopped by the hibernation", ps, p.ID)
	}
	out, err := c2.ProcOutput(ctxT(t), &proto.ProcOutputRequest{ID: p.ID})
	if err != nil || len(out.Chunks) != 1 || string(out.Chunks[0].Data) != "before the sleep\n" {
		t.Fatalf("its output after the wake: %+v, %v", out, err)
	}
	ks, err := c2.List(ctxT(t), &proto.ListRequest{Labels: labels})
	if err != nil || len(ks) != 1 || ks[0].ID != k.ID || ks[0].Running || !ks[0].Hibernated {
		t.Fatalf("the kernel after the wake: %+v, %v", ks, err)
	}
	p2, err := c2.ProcStart(ctxT(t), &proto.ProcStartRequest{Argv: []string{"sleep", "600"}})
	if err != nil || p2.ID != "p2" {
		t.Fatalf("a new process after the wake: %+v, %v; want id p2", p2, err)
	}

	// A plain stop: exit status 0, and nothing recorded to report again.
	cmd2.Process.Signal(syscall.SIGTERM)
	if err := waitWithin(t, cmd2, 20*time.Second, "init ignored SIGTERM"); err != nil {
		t.Fatalf("init exited with %v after SIGTERM, want 0", err)
	}
	cmd3 := startInit(t, sock)
	c3 := attachInit(t, sock, cmd3)
	if ps, err := c3.ProcList(ctxT(t), nil); err != nil || len(ps) != 0 {
		t.Fatalf("after a plain restart: %+v, %v; want nothing listed", ps, err)
	}
	if ks, err := c3.List(ctxT(t), &proto.ListRequest{Labels: labels}); err != nil || len(ks) != 0 {
		t.Fatalf("after a plain restart the kernel is listed again: %+v, %v", ks, err)
	}
	cmd3.Process.Signal(syscall.SIGTERM)
	if err := waitWithin(t, cmd3, 20*time.Second, "init ignored SIGTERM"); err != nil {
		t.Fatalf("init exited with %v", err)
	}
}
