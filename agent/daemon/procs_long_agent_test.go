package daemon_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// realAgent runs the built sandbox-agent as a daemon on a socket, the child
// subreaper that reaps every orphan as in a sandbox, and connects to it.
func realAgent(t *testing.T) *agent.Client {
	t.Helper()
	if agentBin == "" {
		t.Skip("no built sandbox-agent")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	cmd := exec.Command(agentBin, "daemon", "--socket", sock, "--state-dir", filepath.Join(dir, "state"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("the agent did not stop within 10 s of SIGTERM")
		}
	})
	var conn net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent does not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The same processes under the real agent, which reaps through its
// subreaper loop: statuses, a terminal, and a kill of a tree.
func TestProcUnderTheRealAgent(t *testing.T) {
	c := realAgent(t)
	three := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo hi; exit 3"}})
	killed := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "kill -KILL $$"}})
	if p := waitEnded(t, c, three.ID); p.ExitCode == nil || *p.ExitCode != 3 || p.Output != 3 {
		t.Fatalf("exit 3: %+v", p)
	}
	if p := waitEnded(t, c, killed.ID); p.State != proto.ProcKilled || p.Signal != "KILL" || p.ExitCode != nil {
		t.Fatalf("killed: %+v", p)
	}
	tty := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"tty"}, Pty: &proto.PtySize{Rows: 10, Cols: 20}})
	if out, _, _ := readOutput(t, c, tty.ID, 0, 0); !regexp.MustCompile(`^/dev/pts/\d+\r\n$`).Match(out) {
		t.Fatalf("tty printed %q", out)
	}
	m := marker()
	tree := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "sleep " + m + " & setsid sleep " + m + " & wait"}})
	deadline := time.Now().Add(10 * time.Second)
	for len(withArg(m)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the sleeps did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p, err := c.ProcKill(testCtx(t), tree.ID); err != nil || p.Signal != "KILL" {
		t.Fatalf("kill: %+v, %v", p, err)
	}
	waitNone(t, m, 5*time.Second)
}
