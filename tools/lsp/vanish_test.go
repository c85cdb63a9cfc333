package lsp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox/docker/dockertest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/lsp"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A sandbox removed behind sandboxd's back (docker rm -f) is reported to
// lsp and lsp_rename as gone, in the manager's error message, and not as
// an internal error; a write's diagnostics do not turn it into one either.
func TestVanishedSandboxIsReported(t *testing.T) {
	v := toolstest.NewVanishing(t, dockertest.Backend(t, testImage))
	m := lsp.New()
	t.Cleanup(m.Close)
	reg := tools.NewRegistry()
	for _, tool := range append(files.Tools(), m.Tools()...) {
		reg.Register(tool)
	}
	env := v.Env("r1", "/workspace")
	env.AfterWrite = m.AfterWrite(env)
	c := &toolstest.Caller{T: t, Reg: reg, Env: env, Timeout: 2 * time.Minute}
	c.OK("write", map[string]any{"path": "go.mod", "content": "module example.com/m\n\ngo 1.22\n"})
	const mainGo = "package main\n\nfunc main() {}\n"
	c.OK("write", map[string]any{"path": "main.go", "content": mainGo})
	c.OK("lsp", map[string]any{"action": "status"}, "go")
	v.Remove(t)
	res := c.Result("lsp", map[string]any{"action": "status"})
	toolstest.WantGone(t, "lsp status", res)
	if !strings.Contains(res.Text(), "removed outside sandboxd") {
		t.Errorf("the first call after the removal does not say what happened: %q", res.Text())
	}
	toolstest.WantGone(t, "lsp diagnostics", c.Result("lsp", map[string]any{"action": "diagnostics", "file": "main.go"}))
	toolstest.WantGone(t, "lsp_rename", c.Result("lsp_rename", map[string]any{"file": "main.go", "line": toolstest.LineOf(t, mainGo, "func main"), "symbol": "main", "new_name": "run"}))
	toolstest.WantGone(t, "write", c.Result("write", map[string]any{"path": "x.go", "content": "package main\n"}))
}
