package eval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

var agentBin string // built once when the Docker suite or host kernels need it

func TestMain(m *testing.M) { sandboxtest.Main(m, "", &agentBin, nil) }

// slowTool is a read-level tool that takes a while; it stands for a bridge
// call (a worker, a question) that outlasts the cell's budget.
type slowTool struct{ d time.Duration }

func (s slowTool) Spec() tools.Spec {
	return tools.Spec{Name: "slow", Description: "waits", Level: tools.LevelRead, ParallelSafe: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
}
func (slowTool) Available(*tools.Env) bool { return true }
func (s slowTool) Call(ctx context.Context, _ *tools.Env, _ json.RawMessage) (tools.Result, error) {
	select {
	case <-time.After(s.d):
		return tools.Text("slow done"), nil
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
}

// askGate stands in for the approval gate: in a run with approval "ask" it
// refuses every write and exec call, as a human answering Deny would.
type askGate struct{}

func (askGate) Check(_ context.Context, env *tools.Env, spec tools.Spec, _ json.RawMessage) *tools.Result {
	if env.Run.Approval != "ask" {
		return nil
	}
	r := tools.Error("denied by the user: the " + spec.Name + " call was not run")
	return &r
}

// box is where the kernels under test run: an in-process agent daemon over a
// temporary workspace on this machine, or a real container of the sandbox
// image. Each has the real registry with the file tools and eval.
type box struct {
	t      *testing.T
	name   string
	ws     string // workspace path as the kernel sees it
	hostWS string // the same folder on this machine ("" for Docker)
	reg    *tools.Registry
	tool   *eval.Tool
	env    *tools.Env
	conn   func(ctx context.Context) (*agent.Client, error)
	// reconnect gives the box a new agent session, as a restarted sandboxd has.
	reconnect func()
	opts      []eval.Option
	// python has pandas and matplotlib
	scientific bool
}

func (b *box) newTool() {
	if b.tool != nil {
		b.tool.Close() // what a stopping sandboxd does
	}
	b.reg = tools.NewRegistry(tools.WithGate(askGate{}))
	for _, ft := range files.Tools() {
		b.reg.Register(ft)
	}
	b.reg.Register(slowTool{3 * time.Second})
	b.tool = eval.New(b.reg, b.opts...)
	b.reg.Register(b.tool)
	b.t.Cleanup(b.tool.Close)
}

func (b *box) envFor(surface string) *tools.Env {
	e := *b.env
	r := *b.env.Run
	r.Surface = surface
	e.Run = &r
	return &e
}

// hostBox is an in-process agent daemon serving a temp workspace.
func hostBox(t *testing.T) *box {
	for _, bin := range []string{"python3", "node"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed on this machine", bin)
		}
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	client, srv := agenttest.New(t)
	b := &box{t: t, name: "host", ws: ws, hostWS: ws, opts: []eval.Option{eval.WithBudget(300*time.Second, time.Hour)}}
	b.scientific = exec.Command("python3", "-c", "import pandas, matplotlib").Run() == nil
	cur := client
	b.conn = func(context.Context) (*agent.Client, error) { return cur, nil }
	b.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: "t1", Conversation: "c1", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox: func(ctx context.Context) (*tools.SandboxConn, error) {
			c, _ := b.conn(ctx)
			return &tools.SandboxConn{ID: "sb1", Backend: "test", Workspace: ws, Agent: c}, nil
		},
	}
	// reconnect replaces the session, as a restarted sandboxd would open one.
	b.reconnect = func() { cur = agenttest.Connect(t, srv) }
	b.newTool()
	return b
}

// dockerBox is a container of the sandbox image reached through the manager.
func dockerBox(t *testing.T) *box {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	img := os.Getenv("SANDBOXD_TEST_IMAGE")
	if img == "" {
		img = "sandboxd-sandbox:latest"
	}
	be, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(img))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tenant := fmt.Sprintf("evaltest-%d", time.Now().UnixNano())
	var mgr *sandbox.Manager
	start := func() {
		mgr = sandbox.NewManager(be)
		if err := mgr.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	start()
	info, err := mgr.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := mgr.Delete(c, tenant, info.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		mgr.Close()
	})
	b := &box{t: t, name: "docker", ws: "/workspace", scientific: true, opts: []eval.Option{eval.WithBudget(300*time.Second, time.Hour)}}
	b.conn = func(ctx context.Context) (*agent.Client, error) {
		c, _, err := mgr.Agent(ctx, tenant, "c1")
		return c, err
	}
	b.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: tenant, Conversation: "c1", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox: func(ctx context.Context) (*tools.SandboxConn, error) {
			c, err := b.conn(ctx)
			if err != nil {
				return nil, err
			}
			return &tools.SandboxConn{ID: info.ID, Backend: "docker", Workspace: "/workspace", Agent: c}, nil
		},
	}
	// A restarted sandboxd is a new manager with a new pipe.
	b.reconnect = func() {
		mgr.Close()
		start()
	}
	b.newTool()
	return b
}

func (b *box) ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b.t.Cleanup(cancel)
	return c
}

// eval runs a cell through the registry and returns the result.
func (b *box) evalIn(env *tools.Env, lang, code string, extra map[string]any) tools.Result {
	b.t.Helper()
	args := map[string]any{"code": code, "description": "test cell for the eval suite", "language": lang}
	for k, v := range extra {
		args[k] = v
	}
	c := &toolstest.Caller{T: b.t, Reg: b.reg, Timeout: 2 * time.Minute}
	return c.ResultIn(env, "eval", args)
}

func text(r tools.Result) string {
	return tools.Result{Content: r.Content[1:]}.Text() // the first block is the description
}

// ok runs a cell that must succeed and returns its text output.
func (b *box) ok(lang, code string) string {
	b.t.Helper()
	r := b.evalIn(b.env, lang, code, nil)
	if r.IsError {
		b.t.Fatalf("%s cell %q failed: %s", lang, code, text(r))
	}
	return text(r)
}

// fail runs a cell that must fail with text containing want.
func (b *box) fail(lang, code, want string, extra map[string]any) string {
	b.t.Helper()
	r := b.evalIn(b.env, lang, code, extra)
	if !r.IsError || !strings.Contains(text(r), want) {
		b.t.Fatalf("%s cell %q: got (is_error=%v) %q, want an error containing %q", lang, code, r.IsError, text(r), want)
	}
	return text(r)
}

func (b *box) reset(lang string) {
	b.t.Helper()
	r := b.evalIn(b.env, lang, "", map[string]any{"reset": true})
	if r.IsError {
		b.t.Fatalf("reset %s: %s", lang, text(r))
	}
}

// kernelProc finds the running kernel process of lang.
func (b *box) kernelProc(lang string) proto.ProcessInfo {
	b.t.Helper()
	c, err := b.conn(b.ctx())
	if err != nil {
		b.t.Fatal(err)
	}
	ps, err := c.List(b.ctx(), &proto.ListRequest{Labels: map[string]string{"sandboxd.kernel": lang}})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, p := range ps {
		if p.Running {
			return p
		}
	}
	b.t.Fatalf("no running %s kernel in %+v", lang, ps)
	return proto.ProcessInfo{}
}

func (b *box) writeFile(path string, data []byte) {
	b.t.Helper()
	c, err := b.conn(b.ctx())
	if err != nil {
		b.t.Fatal(err)
	}
	if err := c.WriteFiles(b.ctx(), &proto.WriteFilesRequest{Root: b.ws, Files: []proto.WriteFile{{Path: path, Data: data, MkdirAll: true}}}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *box) exists(path string) bool {
	b.t.Helper()
	c, err := b.conn(b.ctx())
	if err != nil {
		b.t.Fatal(err)
	}
	_, err = c.Stat(b.ctx(), &proto.StatRequest{Root: b.ws, Path: path})
	return err == nil
}
