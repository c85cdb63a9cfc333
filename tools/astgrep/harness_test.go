package astgrep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// sandbox is a real agent daemon serving a temporary workspace over an
// in-memory pipe, with the three tools in a real registry.
type sandbox struct {
	t       *testing.T
	ws      string
	reg     *tools.Registry
	env     *tools.Env
	eng     *engine.Engine
	mu      sync.Mutex // guards written
	written [][]string
	dropRun func(string)
	clock   *fakeClock
	srv     *daemon.Server // the agent daemon: "the sandbox", which outlives a replica
	editDir string         // where the tools copy prepared edits (inside the test's temp dir)
}

type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newSandbox(t *testing.T, opts ...astgrep.Option) *sandbox {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox{t: t, ws: filepath.Join(base, "ws"), eng: engine.New(), clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	if err := os.Mkdir(s.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	client, srv := agenttest.New(t)
	s.srv = srv
	s.editDir = filepath.Join(base, "edits")
	conn := &tools.SandboxConn{ID: "sb1", Backend: "test", Workspace: s.ws, Agent: client}
	s.reg = tools.NewRegistry()
	ts, drop := astgrep.Tools(s.eng, append([]astgrep.Option{astgrep.WithClock(s.clock.Now), astgrep.WithEditDir(s.editDir)}, opts...)...)
	for _, tool := range ts {
		s.reg.Register(tool)
	}
	s.dropRun = drop
	s.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: "t1", Conversation: "c1", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
		AfterWrite: func(_ context.Context, _ *tools.SandboxConn, paths []string) []tools.Block {
			s.mu.Lock()
			s.written = append(s.written, paths)
			s.mu.Unlock()
			return []tools.Block{{Type: "text", Text: "diagnostics: none new"}}
		},
	}
	return s
}

func (s *sandbox) ok(name string, args any) string {
	s.t.Helper()
	return s.caller().OK(name, args)
}

func (s *sandbox) fail(name string, args any) string {
	s.t.Helper()
	return s.caller().Bad(name, args)
}

func (s *sandbox) caller() *toolstest.Caller {
	return &toolstest.Caller{T: s.t, Reg: s.reg, Env: s.env}
}

func (s *sandbox) write(rel, content string) {
	s.t.Helper()
	p := filepath.Join(s.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sandbox) read(rel string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.ws, rel))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// editID pulls the edit_id out of an ast_edit result.
func editID(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(l, "edit_id: "); ok {
			return strings.TrimSpace(id)
		}
	}
	t.Fatalf("no edit_id in %q", out)
	return ""
}
