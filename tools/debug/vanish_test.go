package debug_test

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox/docker/dockertest"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/debug"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A sandbox removed behind sandboxd's back (docker rm -f) is reported to
// the debug tool as gone, in the manager's error message, and not as an
// internal error.
func TestVanishedSandboxIsReported(t *testing.T) {
	v := toolstest.NewVanishing(t, dockertest.Backend(t, sandboxtest.Image("sandboxd-sandbox:latest")))
	sv := debug.NewSupervisor()
	t.Cleanup(sv.Close)
	reg := tools.NewRegistry()
	reg.Register(debug.New(sv))
	c := &toolstest.Caller{T: t, Reg: reg, Env: v.Env("r1", "")}
	c.OK("debug", op("status"))
	c.OK("debug", op("breakpoints", "file", "main.py", "lines", []int{1}), "saved")
	v.Remove(t)
	res := c.Result("debug", op("status"))
	toolstest.WantGone(t, "debug status", res)
	if !strings.Contains(res.Text(), "removed outside sandboxd") {
		t.Errorf("the first call after the removal does not say what happened: %q", res.Text())
	}
	for _, args := range []map[string]any{op("launch", "program", "main.py"), op("adapters"), op("terminate")} {
		toolstest.WantGone(t, "debug "+args["operation"].(string), c.Result("debug", args))
	}
}
