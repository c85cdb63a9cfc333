package astgrep_test

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox/docker/dockertest"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A sandbox removed behind sandboxd's back (docker rm -f) is reported to
// ast_grep, ast_edit and resolve as gone, in the manager's error message,
// and not as an internal error.
func TestVanishedSandboxIsReported(t *testing.T) {
	v := toolstest.NewVanishing(t, dockertest.Backend(t, sandboxtest.Image("sandboxd-sandbox:latest")))
	reg := tools.NewRegistry()
	ts, drop := astgrep.Tools(engine.New())
	t.Cleanup(func() { drop("r1") })
	for _, tool := range append(files.Tools(), ts...) {
		reg.Register(tool)
	}
	c := &toolstest.Caller{T: t, Reg: reg, Env: v.Env("r1", "")}
	c.OK("write", map[string]any{"path": "a.go", "content": "package a\n\nfunc f(x int) int { return g(x) }\n"})
	c.OK("ast_grep", map[string]any{"pattern": "g($X)", "path": "a.go"}, "a.go")
	prepared := c.OK("ast_edit", map[string]any{"pattern": "g($X)", "rewrite": "h($X)", "path": "a.go"})
	id := ""
	for _, l := range strings.Split(prepared, "\n") {
		if rest, ok := strings.CutPrefix(l, "edit_id: "); ok {
			id = strings.TrimSpace(rest)
		}
	}
	v.Remove(t)
	res := c.Result("ast_grep", map[string]any{"pattern": "g($X)", "path": "a.go"})
	toolstest.WantGone(t, "ast_grep", res)
	if !strings.Contains(res.Text(), "removed outside sandboxd") {
		t.Errorf("the first call after the removal does not say what happened: %q", res.Text())
	}
	toolstest.WantGone(t, "ast_edit", c.Result("ast_edit", map[string]any{"pattern": "g($X)", "rewrite": "h($X)", "path": "a.go"}))
	toolstest.WantGone(t, "resolve", c.Result("resolve", map[string]any{"edit_id": id, "action": "accept"}))
}
