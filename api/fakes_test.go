package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// leakySandboxes is a sandbox manager that ignores the tenant everywhere:
// it looks up by id or conversation alone. Tenant isolation tests run on it
// so that they show the API itself never hands out another tenant's object.
type leakySandboxes struct {
	workspace string

	mu         sync.Mutex // guards the fields below
	byID       map[string]sandbox.Info
	n          int
	agentCalls int
	lookupErr  error
	lastSpec   sandbox.Spec
}

var _ Sandboxes = (*leakySandboxes)(nil)

func newLeaky() *leakySandboxes {
	return &leakySandboxes{byID: map[string]sandbox.Info{}, workspace: "/workspace"}
}

func (f *leakySandboxes) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastSpec = spec
	for _, in := range f.byID {
		if in.Tenant == spec.Tenant && in.Conversation == spec.Conversation {
			return sandbox.Info{}, errdefs.Conflict("conversation %s already has a sandbox", spec.Conversation)
		}
	}
	f.n++
	in := sandbox.Info{
		ID: fmt.Sprintf("sb-%d", f.n), Tenant: spec.Tenant, Conversation: spec.Conversation, Backend: "fake",
		Image: spec.Image, State: sandbox.StateRunning, CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Workspace: f.workspace,
	}
	if spec.HostWorkspace != "" {
		in.Workspace = spec.HostWorkspace
	}
	f.byID[in.ID] = in
	return in, nil
}

func (f *leakySandboxes) Get(ctx context.Context, tenant, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.byID[id]
	if !ok {
		return sandbox.Info{}, errdefs.NotFound("no sandbox %s", id)
	}
	return in, nil
}

func (f *leakySandboxes) List(ctx context.Context, tenant, conversation string) ([]sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sandbox.Info
	for _, in := range f.byID {
		if conversation == "" || in.Conversation == conversation {
			out = append(out, in)
		}
	}
	return out, nil
}

func (f *leakySandboxes) Lookup(ctx context.Context, tenant, conversation string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lookupErr != nil {
		return sandbox.Info{}, f.lookupErr
	}
	for _, in := range f.byID {
		if in.Conversation == conversation {
			return in, nil
		}
	}
	return sandbox.Info{}, errdefs.NotFound("conversation %s has no sandbox", conversation)
}

func (f *leakySandboxes) Delete(ctx context.Context, tenant, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byID[id]; !ok {
		return errdefs.NotFound("no sandbox %s", id)
	}
	delete(f.byID, id)
	return nil
}

func (f *leakySandboxes) Agent(ctx context.Context, tenant, conversation string) (*agent.Client, sandbox.Info, error) {
	f.mu.Lock()
	f.agentCalls++
	f.mu.Unlock()
	in, err := f.Lookup(ctx, tenant, conversation)
	return nil, in, err
}

func (f *leakySandboxes) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byID)
}

// testTool is a tool whose call reports what it saw of the run.
type testTool struct {
	spec      tools.Spec
	available func(*tools.Env) bool
	why       func(*tools.Env) string // nil: the registry's generic reason
	call      func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error)
}

func (t *testTool) Why(env *tools.Env) string {
	if t.why == nil {
		return ""
	}
	return t.why(env)
}

func (t *testTool) Spec() tools.Spec { return t.spec }

func (t *testTool) Available(env *tools.Env) bool { return t.available == nil || t.available(env) }

func (t *testTool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
	return t.call(ctx, env, args)
}

// newRegistry returns the real registry with three tools: peek (read,
// always there), poke (write, needs a sandbox) and shellish (exec, needs a
// sandbox).
func newRegistry() *tools.Registry {
	reg := tools.NewRegistry()
	reg.Register(&testTool{
		spec: tools.Spec{Name: "peek", Description: "peek at the run", Level: tools.LevelRead, ParallelSafe: true,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			return tools.Text(fmt.Sprintf("surface=%s workdir=%s sandbox=%v args=%s", env.Run.Surface, env.Run.Workdir, env.HasSandbox, args)), nil
		},
	})
	reg.Register(&testTool{
		spec: tools.Spec{Name: "poke", Description: "write something", Level: tools.LevelWrite,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
		available: func(env *tools.Env) bool { return env.HasSandbox },
		why:       tools.WhyNoSandbox,
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			conn, err := env.Sandbox(ctx)
			if err != nil {
				return tools.Error(err.Error()), nil
			}
			return tools.Text("wrote in " + conn.ID + " at " + conn.Workspace), nil
		},
	})
	reg.Register(&testTool{
		spec:      tools.Spec{Name: "shellish", Description: "run something", Level: tools.LevelExec},
		available: func(env *tools.Env) bool { return env.HasSandbox },
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			return tools.Text("ran"), nil
		},
	})
	return reg
}

const (
	tokenA = "token-of-tenant-a"
	tokenB = "token-of-tenant-b"
)

type harness struct {
	t    *testing.T
	srv  *Server
	sb   *leakySandboxes
	http *httptest.Server
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	a, _ := ParseTenantToken("a", HashToken(tokenA))
	b, _ := ParseTenantToken("b", HashToken(tokenB))
	sb := newLeaky()
	h := &harness{t: t, sb: sb}
	h.srv = New(sb, newRegistry(), NewTokenAuth(a, b), opts...)
	h.http = httptest.NewServer(h.srv)
	t.Cleanup(h.http.Close)
	return h
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errBody(t *testing.T) ErrorDetail {
	t.Helper()
	var eb ErrorBody
	if err := json.Unmarshal(a.body, &eb); err != nil || eb.Error.Code == "" {
		t.Fatalf("answer %d is not an error body: %s", a.status, a.body)
	}
	return eb.Error
}

func (h *harness) do(method, path, token, body string) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.http.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: []byte(sb.String())}
}

// must does a request and decodes a success response into v.
func (h *harness) must(method, path, token, body string, want int, v any) {
	h.t.Helper()
	a := h.do(method, path, token, body)
	if a.status != want {
		h.t.Fatalf("%s %s: status %d, want %d: %s", method, path, a.status, want, a.body)
	}
	if v != nil {
		if err := json.Unmarshal(a.body, v); err != nil {
			h.t.Fatalf("%s %s: %v: %s", method, path, err, a.body)
		}
	}
}
