package eval_test

import (
	"strings"
	"testing"
	"time"

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
