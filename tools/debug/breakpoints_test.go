package debug

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools"
)

// A breakpoint file outside the sandbox's workspace is refused with an
// error message and never stored; one inside is kept for launch.
func TestBreakpointFileInsideWorkspace(t *testing.T) {
	sv := NewSupervisor()
	defer sv.Close()
	tool := New(sv)
	for _, ws := range []string{"/workspace", "/data/sandboxes/sb-1/workspace"} {
		env := &tools.Env{
			Run:        &tools.Run{ID: "r1", Tenant: "t", Conversation: "c-" + ws, Workdir: ws + "/app"},
			HasSandbox: true,
			Sandbox: func(context.Context) (*tools.SandboxConn, error) {
				return &tools.SandboxConn{ID: "sb-" + ws, Workspace: ws}, nil
			},
		}
		call := func(file string) tools.Result {
			t.Helper()
			args, _ := json.Marshal(map[string]any{"operation": "breakpoints", "file": file, "lines": []int{3}})
			res, err := tool.Call(context.Background(), env, args)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		for _, file := range []string{"/etc/passwd", "../../etc/passwd", "../../../../../../etc/shadow", ws + "x/main.py", "/workspacex/a.py", "a\x00.py"} {
			res := call(file)
			if !res.IsError || !strings.Contains(res.Text(), "workspace "+ws) || strings.Contains(res.Text(), "saved") {
				t.Errorf("workspace %s, file %q: %+v", ws, file, res)
			}
		}
		key := convKey("sb-"+ws, "t", "c-"+ws)
		if bps := sv.breakpoints(key); len(bps) != 0 {
			t.Fatalf("refused files were stored: %v", bps)
		}
		for _, file := range []string{"main.py", "../lib/util.py", ws + "/app/main.py"} {
			if res := call(file); res.IsError || !strings.Contains(res.Text(), "saved") {
				t.Errorf("workspace %s, file %q refused: %+v", ws, file, res)
			}
		}
		if bps := sv.breakpoints(key); len(bps) != 2 {
			t.Fatalf("stored %v, want main.py and lib/util.py", bps)
		}
	}
}
