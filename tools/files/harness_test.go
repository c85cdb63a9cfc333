package files_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// sandbox is a real agent daemon serving a temporary workspace over an
// in-memory pipe, with the file tools registered in a real registry.
type sandbox struct {
	t       *testing.T
	ws      string // the workspace
	outside string // a sibling directory that must never be touched
	reg     *tools.Registry
	env     *tools.Env
	written [][]string // paths passed to AfterWrite
}

func newSandbox(t *testing.T, opts ...files.Option) *sandbox {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox{t: t, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{s.ws, s.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	client, _ := agenttest.New(t)
	conn := &tools.SandboxConn{ID: "sb1", Backend: "test", Workspace: s.ws, Agent: client}
	s.reg = tools.NewRegistry()
	for _, tool := range files.Tools(opts...) {
		s.reg.Register(tool)
	}
	s.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: "t1", Conversation: "c1", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
		AfterWrite: func(_ context.Context, _ *tools.SandboxConn, paths []string) []tools.Block {
			s.written = append(s.written, paths)
			return []tools.Block{{Type: "text", Text: "diagnostics: none new"}}
		},
	}
	return s
}

// ok runs a call that must succeed.
func (s *sandbox) ok(name string, args any) string {
	s.t.Helper()
	return s.caller().OK(name, args)
}

// bad runs a call that must fail with a message containing want.
func (s *sandbox) bad(name string, args any, want string) string {
	s.t.Helper()
	return s.caller().Bad(name, args, want)
}

func (s *sandbox) caller() *toolstest.Caller {
	return &toolstest.Caller{T: s.t, Reg: s.reg, Env: s.env, Timeout: 30 * time.Second}
}

func (s *sandbox) put(rel, content string) {
	s.t.Helper()
	p := filepath.Join(s.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sandbox) get(rel string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.ws, rel))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}
