package eval_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// After the sandbox hibernated (its agent recorded the kernel, killed it
// and a new agent started on the same state dir), the next cell is not
// run: the answer says the kernel was stopped by the hibernation and its
// variables are gone; the cell after it runs in a new kernel.
func TestKernelStoppedByHibernation(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this machine")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cur, srv := agenttest.New(t, daemon.WithStateDir(state))
	b := &box{t: t, name: "host", ws: ws, hostWS: ws, opts: []eval.Option{eval.WithBudget(300*time.Second, time.Hour)}}
	b.conn = func(context.Context) (*agent.Client, error) { return cur, nil }
	b.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: "t1", Conversation: "c1", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox: func(ctx context.Context) (*tools.SandboxConn, error) {
			return &tools.SandboxConn{ID: "sb1", Backend: "test", Workspace: ws, Agent: cur}, nil
		},
	}
	b.newTool()

	b.ok("python", "kept = 41")
	old := b.kernelProc("python")
	if err := srv.Hibernate(); err != nil {
		t.Fatal(err)
	}
	woken := daemon.New(daemon.WithStateDir(state))
	t.Cleanup(func() { woken.Close() })
	if err := woken.RestoreHibernation(); err != nil {
		t.Fatal(err)
	}
	cur = agenttest.Connect(t, woken)

	msg := b.fail("python", "open('rerun.txt', 'w').write('ran')", "the kernel was stopped when the sandbox hibernated: its variables are gone; a new kernel is ready", nil)
	want(t, msg, "This cell was not run")
	if b.exists("rerun.txt") {
		t.Fatal("the cell ran although the kernel was stopped by the hibernation")
	}
	b.fail("python", "kept", "NameError", nil) // the new kernel has no state
	if got := b.ok("python", "kept = 1\nkept + 1"); got != "2" {
		t.Fatalf("a cell in the new kernel: %q", got)
	}
	if q := b.kernelProc("python"); q.ID == old.ID {
		t.Fatal("no new kernel after the hibernation")
	}
	ps, err := cur.List(b.ctx(), &proto.ListRequest{Labels: map[string]string{"sandboxd.kernel": "python"}})
	if err != nil {
		t.Fatal(err)
	}
	reported := 0
	for _, p := range ps {
		if p.Hibernated {
			reported++
		}
	}
	if reported != 1 {
		t.Fatalf("kernels listed after the wake: %+v; want the old one, stopped by the hibernation, once", ps)
	}
}
