package debug_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/debug"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// One real sandbox (the sandbox image on Docker) serves every test; each
// test is its own conversation with its own working directory in it, so
// sessions never meet.
type shared struct {
	m      *sandbox.Manager
	ag     *agent.Client
	info   sandbox.Info
	tenant string
}

var sb *shared // set by TestMain when Docker tests run

func TestMain(m *testing.M) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		os.Exit(m.Run())
	}
	code, err := runWithSandbox(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "debug tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runWithSandbox(m *testing.M) (int, error) {
	image := os.Getenv("SANDBOXD_TEST_IMAGE")
	if image == "" {
		image = "sandboxd-sandbox:latest"
	}
	dir, err := os.MkdirTemp("", "sandboxd-debug-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin := os.Getenv("SANDBOXD_AGENT_BIN")
	if bin == "" {
		if bin, err = sandboxtest.BuildAgent(dir); err != nil {
			return 0, err
		}
	}
	b, err := docker.New(docker.WithAgentBinary(bin), docker.WithDefaultImage(image))
	if err != nil {
		return 0, err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	removeStale(ctx)
	mgr := sandbox.NewManager(b)
	if err := mgr.Start(ctx); err != nil {
		return 0, err
	}
	defer mgr.Close()
	s := &shared{m: mgr, tenant: "debugtest-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	s.info, err = mgr.Create(ctx, sandbox.Spec{Tenant: s.tenant, Conversation: "debug-tests", Image: image})
	if err != nil {
		return 0, err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		_ = mgr.Delete(dctx, s.tenant, s.info.ID)
	}()
	s.ag, _, err = mgr.Agent(ctx, s.tenant, "debug-tests")
	if err != nil {
		return 0, err
	}
	sb = s
	return m.Run(), nil
}

// removeStale removes sandboxes an earlier run of these tests left behind
// when it was killed before its cleanup (a test binary timeout exits
// without running defers). Only this package's tenants, and only old ones,
// so a concurrent run keeps its sandbox.
func removeStale(ctx context.Context) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelTenant))})
	if err != nil {
		return
	}
	for _, c := range list {
		if strings.HasPrefix(c.Labels[sandbox.LabelTenant], "debugtest-") && time.Since(time.Unix(c.Created, 0)) > time.Hour {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
}

func needDocker(t testing.TB) {
	t.Helper()
	if sb == nil {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run the debug tool against real adapters in the sandbox image")
	}
}

// harness is one conversation driving the debug tool through a registry.
type harness struct {
	t   testing.TB
	dir string // the working directory inside the sandbox
	reg *tools.Registry
	env *tools.Env
	sv  *debug.Supervisor
	// fx is every file put, as put: tests find their lines in it by text
	// (toolstest.Fixture), never by line numbers.
	fx toolstest.Fixture
}

func newHarness(t testing.TB, opts ...debug.Option) *harness {
	t.Helper()
	needDocker(t)
	conv := "c-" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	h := &harness{t: t, dir: path.Join(sb.info.Workspace, conv), fx: toolstest.Fixture{}}
	h.sv = debug.NewSupervisor(append([]debug.Option{debug.WithStopWait(20 * time.Second)}, opts...)...)
	h.reg = tools.NewRegistry()
	h.reg.Register(debug.New(h.sv))
	conn := &tools.SandboxConn{ID: sb.info.ID, Backend: "docker", Workspace: sb.info.Workspace, Agent: sb.ag}
	h.env = &tools.Env{
		Run:        &tools.Run{ID: "r-" + conv, Tenant: sb.tenant, Conversation: conv, Surface: tools.SurfaceDefault, Workdir: conv},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	// A fresh directory each time, so -count=N starts every run clean.
	h.sh("rm -rf " + h.dir + " && mkdir -p " + h.dir)
	t.Cleanup(func() {
		h.call(map[string]any{"operation": "terminate"})
		h.sv.Close()
	})
	return h
}

// restarted is the same conversation seen by a new supervisor, as after a
// sandboxd restart: the old one's timers stop and it is no longer used.
func (h *harness) restarted(opts ...debug.Option) *harness {
	h.sv.Close()
	n := &harness{t: h.t, dir: h.dir, env: h.env, fx: h.fx}
	n.sv = debug.NewSupervisor(append([]debug.Option{debug.WithStopWait(20 * time.Second)}, opts...)...)
	n.reg = tools.NewRegistry()
	n.reg.Register(debug.New(n.sv))
	h.t.Cleanup(func() {
		n.call(map[string]any{"operation": "terminate"})
		n.sv.Close()
	})
	return n
}

// line is the 1-based line of the file put as rel that holds text.
func (h *harness) line(rel, text string) int {
	h.t.Helper()
	return h.fx.Line(h.t, rel, text)
}

// at is "rel:LINE" for text in the file put as rel: how the tool names a
// stop or a frame there.
func (h *harness) at(rel, text string) string {
	h.t.Helper()
	return fmt.Sprintf("%s:%d", rel, h.line(rel, text))
}

// put writes a file under the working directory.
func (h *harness) put(rel, content string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := sb.ag.WriteFiles(ctx, &proto.WriteFilesRequest{Root: h.dir, Files: []proto.WriteFile{{Path: rel, Data: []byte(content)}}})
	h.fx[rel] = content
	if err != nil {
		h.t.Fatalf("writing %s: %v", rel, err)
	}
}

// sh runs a shell command in the working directory and returns stdout; a
// failure ends the test.
func (h *harness) sh(cmd string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := sb.ag.Exec(ctx, &proto.ExecRequest{Argv: []string{"/bin/sh", "-c", cmd}, Dir: sb.info.Workspace})
	if err != nil || res.ExitCode != 0 {
		h.t.Fatalf("%s: %v exit %v\n%s%s", cmd, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func (h *harness) call(args map[string]any) (string, bool) {
	h.t.Helper()
	return h.caller().Call("debug", args)
}

// ok runs an operation that must succeed and contain every want.
func (h *harness) ok(args map[string]any, want ...string) string {
	h.t.Helper()
	return h.caller().OK("debug", args, want...)
}

// bad runs an operation that must fail with a message containing want.
func (h *harness) bad(args map[string]any, want string) string {
	h.t.Helper()
	return h.caller().Bad("debug", args, want)
}

func (h *harness) caller() *toolstest.Caller {
	return &toolstest.Caller{T: h.t, Reg: h.reg, Env: h.env, Timeout: 4 * time.Minute}
}

func op(name string, kv ...any) map[string]any {
	m := map[string]any{"operation": name}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// num finds the first integer after prefix in text (e.g. "[frame " or "[ref ").
func num(t *testing.T, text, prefix string) int {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(prefix) + `(\d+)`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %q<number> in:\n%s", prefix, text)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// refOf finds the reference of a named scope or variable line.
func refOf(t *testing.T, text, name string) int {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "- "+name+" ") {
			re := regexp.MustCompile(`\[(?:ref|reference) (\d+)`)
			if m := re.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				return n
			}
		}
	}
	t.Fatalf("no reference for %q in:\n%s", name, text)
	return 0
}
