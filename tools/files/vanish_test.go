package files_test

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox/docker/dockertest"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A sandbox removed behind sandboxd's back (docker rm -f) is reported to
// every file tool as gone, in the manager's error message, not as an
// internal error.
func TestVanishedSandboxIsReported(t *testing.T) {
	v := toolstest.NewVanishing(t, dockertest.Backend(t, sandboxtest.Image("sandboxd-sandbox:latest")))
	reg := tools.NewRegistry()
	for _, tool := range files.Tools() {
		reg.Register(tool)
	}
	c := &toolstest.Caller{T: t, Reg: reg, Env: v.Env("r1", "")}
	c.OK("write", map[string]any{"path": "a.txt", "content": "hello\n"})
	c.OK("read", map[string]any{"path": "a.txt"}, "hello")
	v.Remove(t)
	if res := c.Result("read", map[string]any{"path": "a.txt"}); !strings.Contains(res.Text(), "removed outside sandboxd") {
		t.Errorf("the first call after the removal does not say what happened: %q", res.Text())
	}
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"read", map[string]any{"path": "a.txt"}},
		{"write", map[string]any{"path": "b.txt", "content": "x"}},
		{"edit", map[string]any{"path": "a.txt", "old": "hello", "new": "bye"}},
		{"apply_patch", map[string]any{"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+bye\n"}},
		{"shell", map[string]any{"command": "true"}},
	} {
		toolstest.WantGone(t, tc.name, c.Result(tc.name, tc.args))
	}
}
