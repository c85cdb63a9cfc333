package files_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
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

// call runs a tool through the registry and returns its text and is_error.
func (s *sandbox) call(name string, args any) (string, bool) {
	s.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.reg.Call(ctx, s.env, name, raw)
	if err != nil {
		s.t.Fatalf("%s: Go error %v", name, err)
	}
	return res.Text(), res.IsError
}

// ok runs a call that must succeed.
func (s *sandbox) ok(name string, args any) string {
	s.t.Helper()
	text, isErr := s.call(name, args)
	if isErr {
		s.t.Fatalf("%s %v failed: %s", name, args, text)
	}
	return text
}

// bad runs a call that must fail with a message containing want.
func (s *sandbox) bad(name string, args any, want string) string {
	s.t.Helper()
	text, isErr := s.call(name, args)
	if !isErr || !strings.Contains(text, want) {
		s.t.Fatalf("%s %v: got (is_error=%v) %q, want an error containing %q", name, args, isErr, text, want)
	}
	return text
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
