package eval_test

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// Without a sandbox and without host kernels, eval is absent and says both.
func TestWhyNoKernelPlace(t *testing.T) {
	reg := tools.NewRegistry()
	tool := eval.New(reg)
	defer tool.Close()
	reg.Register(tool)
	env := &tools.Env{Run: &tools.Run{Conversation: "c1", Surface: tools.SurfaceDefault}}
	got := reg.Unavailable(env)
	if len(got) != 1 || got[0].Tools[0] != "eval" || !strings.Contains(got[0].Reason, `the conversation "c1" has no sandbox and kernels on the host are off`) {
		t.Fatalf("unavailable: %+v", got)
	}
	env.HasSandbox = true
	if got := reg.Unavailable(env); len(got) != 0 {
		t.Fatalf("with a sandbox: %+v", got)
	}
}
