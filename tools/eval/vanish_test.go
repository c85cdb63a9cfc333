package eval_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox/docker/dockertest"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A sandbox removed behind sandboxd's back (docker rm -f) while its kernel
// ran is reported to eval as gone, with what that means for the kernel's
// state, and not as an internal error.
func TestVanishedSandboxIsReported(t *testing.T) {
	v := toolstest.NewVanishing(t, dockertest.Backend(t, sandboxtest.Image("sandboxd-sandbox:latest")))
	reg := tools.NewRegistry()
	tool := eval.New(reg)
	t.Cleanup(tool.Close)
	reg.Register(tool)
	c := &toolstest.Caller{T: t, Reg: reg, Env: v.Env("r1", ""), Timeout: 2 * time.Minute}
	cell := map[string]any{"code": "x = 41\nprint(x + 1)", "description": "a cell before the removal"}
	c.OK("eval", cell, "42")
	v.Remove(t)
	res := c.Result("eval", cell)
	toolstest.WantGone(t, "eval", res)
	if !strings.Contains(res.Text(), "state") || !strings.Contains(res.Text(), "removed outside sandboxd") {
		t.Errorf("eval after the removal does not say what happened to the kernel: %q", res.Text())
	}
	toolstest.WantGone(t, "eval again", c.Result("eval", cell))
}

// A sandbox deleted (as DELETE /v1/sandboxes/{id} does) while a cell runs
// in it: the cell's result says the sandbox was deleted and the kernel
// with it, never to call eval again to reconnect to a kernel that no
// longer exists.
func TestSandboxDeletedUnderARunningCell(t *testing.T) {
	v := toolstest.NewVanishing(t, dockertest.Backend(t, sandboxtest.Image("sandboxd-sandbox:latest")))
	reg := tools.NewRegistry()
	tool := eval.New(reg)
	t.Cleanup(tool.Close)
	reg.Register(tool)
	c := &toolstest.Caller{T: t, Reg: reg, Env: v.Env("r1", ""), Timeout: 2 * time.Minute}
	cell := map[string]any{"code": "import time\nopen('started.flag', 'w').close()\ntime.sleep(120)", "description": "a cell the deletion cuts short"}
	got := make(chan tools.Result, 1)
	go func() { got <- c.Result("eval", cell) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agent, _, err := v.M.Agent(ctx, v.Tenant, v.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := agent.Stat(ctx, &proto.StatRequest{Root: v.Info.Workspace, Path: "started.flag"}); err == nil {
			break
		}
		select {
		case res := <-got:
			t.Fatalf("the cell ended before the deletion: %s", res.Text())
		case <-ctx.Done():
			t.Fatal("the cell did not start within a minute")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := v.M.Delete(ctx, v.Tenant, v.Info.ID); err != nil {
		t.Fatalf("deleting the sandbox: %v", err)
	}
	var res tools.Result
	select {
	case res = <-got:
	case <-ctx.Done():
		t.Fatal("the cell did not answer within a minute of its sandbox's deletion")
	}
	text := res.Text()
	if !res.IsError || !strings.Contains(text, "was deleted") || !strings.Contains(text, "its kernel with it") || strings.Contains(text, "reconnect") {
		t.Fatalf("the cell whose sandbox was deleted answers:\n%s\nwant an error saying the sandbox was deleted and its kernel with it, with no advice to reconnect", text)
	}
	toolstest.WantGone(t, "eval after the deletion", c.Result("eval", map[string]any{"code": "print(1)", "description": "a cell after the deletion"}))
}
