package lsp_test

import (
	"context"
	"os"
	"path"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/lsp"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// Integration tests run the real language servers in the real sandbox image
// on Docker when SANDBOXD_TEST_DOCKER=1.

var (
	agentBin  string
	testImage = sandboxtest.Image("sandboxd-sandbox:latest")
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		runFakeServer(mode)
		os.Exit(0)
	}
	sandboxtest.Main(m, "SANDBOXD_TEST_DOCKER", &agentBin, nil)
}

// box is one Docker sandbox with the fixture written into its workspace,
// the lsp tools and the file tools in a real registry, and diagnostics on
// write wired as serve wires them.
type box struct {
	t    *testing.T
	mgr  *sandbox.Manager
	lsp  *lsp.Manager
	reg  *tools.Registry
	env  *tools.Env
	conn *tools.SandboxConn
	ws   string
	// fx is the fixture as written: tests find their positions in it by
	// text (toolstest.Fixture), never by line numbers.
	fx toolstest.Fixture
}

func newBox(t *testing.T, fixtures []string, opts ...lsp.Option) *box {
	t.Helper()
	return newBoxOn(t, fixtures, "", opts...)
}

// newBoxOn is newBox with the sandbox's workspace bound to hostWS, a
// directory of this machine, when that is not empty: the fixture is
// written there through the agent, and the host can change it behind the
// tools' back.
func newBoxOn(t *testing.T, fixtures []string, hostWS string, opts ...lsp.Option) *box {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run the language servers in the sandbox image on Docker")
	}
	b, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(testImage))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mgr, tenant, info := sandboxtest.OpenSpec(t, b, "lsp", sandbox.Spec{Image: testImage, HostWorkspace: hostWS})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, info, err := mgr.Agent(ctx, tenant, "c1")
	if err != nil {
		t.Fatal(err)
	}
	bx := &box{t: t, mgr: mgr, ws: info.Workspace, fx: readFixture(t, fixtures)}
	bx.conn = &tools.SandboxConn{ID: info.ID, Backend: "docker", Workspace: info.Workspace, Agent: client}
	var writes []proto.WriteFile
	for name, data := range bx.fx {
		writes = append(writes, proto.WriteFile{Path: path.Join(info.Workspace, name), Data: []byte(data), MkdirAll: true})
	}
	if len(writes) > 0 {
		if err := client.WriteFiles(ctx, &proto.WriteFilesRequest{Root: info.Workspace, Files: writes}); err != nil {
			t.Fatal(err)
		}
	}
	// The -race detector on shared cores slows the servers' first reports
	// well past the production wait; the tests judge what is reported,
	// not how fast (speed is the benchmark's).
	bx.lsp = lsp.New(append([]lsp.Option{lsp.WithDiagnosticsWait(10 * time.Second)}, opts...)...)
	t.Cleanup(bx.lsp.Close)
	bx.reg = tools.NewRegistry()
	for _, tool := range files.Tools() {
		bx.reg.Register(tool)
	}
	for _, tool := range bx.lsp.Tools() {
		bx.reg.Register(tool)
	}
	bx.env = &tools.Env{
		Run:        &tools.Run{ID: "run-1", Tenant: tenant, Conversation: "c1", Surface: tools.SurfaceDefault, Workdir: info.Workspace},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return bx.conn, nil },
	}
	bx.env.AfterWrite = bx.lsp.AfterWrite(bx.env)
	return bx
}

// readFixture reads the txtar archives of testdata named by fixtures.
func readFixture(t *testing.T, fixtures []string) toolstest.Fixture {
	t.Helper()
	paths := make([]string, len(fixtures))
	for i, f := range fixtures {
		paths[i] = "testdata/" + f
	}
	return toolstest.ReadFixture(t, paths...)
}

// ok runs a call that must succeed and whose text must contain every want.
func (bx *box) ok(name string, args map[string]any, wants ...string) string {
	bx.t.Helper()
	return bx.caller().OK(name, args, wants...)
}

// bad runs a call that must fail with a message containing every want.
func (bx *box) bad(name string, args map[string]any, wants ...string) string {
	bx.t.Helper()
	return bx.caller().Bad(name, args, wants...)
}

func (bx *box) caller() *toolstest.Caller {
	return &toolstest.Caller{T: bx.t, Reg: bx.reg, Env: bx.env, Timeout: 2 * time.Minute, LogTimes: true}
}

// goHover is the lsp call of a hover on sq where go.txtar's main.go makes it.
func goHover(t *testing.T, bx *box) map[string]any {
	t.Helper()
	return nav("hover", "goproj/main.go", bx.fx.Line(t, "goproj/main.go", "sq := shapes.NewSquare(2)"), "sq")
}

// goDefinition is the lsp call of the definition of NewSquare where
// go.txtar's main.go calls it; goDefinedAt is what its result starts with.
func goDefinition(t *testing.T, bx *box) map[string]any {
	t.Helper()
	return nav("definition", "goproj/main.go", bx.fx.Line(t, "goproj/main.go", "sq := shapes.NewSquare(2)"), "NewSquare")
}

func goDefinedAt(t *testing.T, bx *box) string {
	t.Helper()
	return bx.fx.At(t, "goproj/shapes/shape.go", "func NewSquare(")
}

func nav(action, file string, line int, symbol string) map[string]any {
	return map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}
}
