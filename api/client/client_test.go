package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

type echoTool struct{ level tools.Level }

func (e echoTool) Spec() tools.Spec {
	return tools.Spec{Name: "echo_" + string(e.level), Description: "echo", Level: e.level, ParallelSafe: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}`)}
}
func (echoTool) Available(*tools.Env) bool { return true }
func (echoTool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
	var a struct{ Text string }
	json.Unmarshal(args, &a)
	if a.Text == "fail" {
		return tools.Error("asked to fail"), nil
	}
	return tools.Text("echo: " + a.Text + " in " + env.Run.Conversation), nil
}

func setup(t *testing.T) (*Client, *Client, *apitest.Sandboxes) {
	t.Helper()
	reg := tools.NewRegistry()
	reg.Register(echoTool{tools.LevelRead})
	reg.Register(echoTool{tools.LevelWrite})
	a, _ := api.ParseTenantToken("a", api.HashToken("ta"))
	b, _ := api.ParseTenantToken("b", api.HashToken("tb"))
	sb := apitest.New()
	srv := httptest.NewServer(api.New(sb, reg, api.NewTokenAuth(a, b)))
	t.Cleanup(srv.Close)
	ca, err := New(srv.URL+"/", "ta")
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := New(srv.URL, "tb")
	return ca, cb, sb
}

func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	c, other, _ := setup(t)
	if err := c.Healthz(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Readyz(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: "c1", Image: "img", Resources: &api.Resources{CPUs: 1}})
	if err != nil || sb.ID == "" || sb.Image != "img" || sb.State != "running" || sb.Conversation != "c1" {
		t.Fatalf("CreateSandbox = %+v, %v", sb, err)
	}
	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: "c1"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("second create: %v", err)
	}
	got, err := c.GetSandbox(ctx, sb.ID)
	if err != nil || got.ID != sb.ID {
		t.Errorf("GetSandbox = %+v, %v", got, err)
	}
	list, err := c.ListSandboxes(ctx, "c1")
	if err != nil || len(list) != 1 {
		t.Errorf("ListSandboxes = %v, %v", list, err)
	}
	list, err = c.ListSandboxes(ctx, "")
	if err != nil || len(list) != 1 {
		t.Errorf("ListSandboxes all = %v, %v", list, err)
	}

	run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "c1", Surface: "plan"})
	if err != nil || run.ID == "" || run.Surface != "plan" || len(run.Tools) != 1 || run.Tools[0].Name != "echo_read" {
		t.Fatalf("CreateRun = %+v, %v", run, err)
	}
	specs, err := c.Tools(ctx, run.ID)
	if err != nil || len(specs) != 1 || string(specs[0].InputSchema) == "" {
		t.Errorf("Tools = %+v, %v", specs, err)
	}
	res, err := c.CallTool(ctx, run.ID, "echo_read", json.RawMessage(`{"text":"hi"}`))
	if err != nil || res.IsError || res.Content[0].Text != "echo: hi in c1" {
		t.Errorf("CallTool = %+v, %v", res, err)
	}
	res, err = c.CallTool(ctx, run.ID, "echo_read", json.RawMessage(`{"text":"fail"}`))
	if err != nil || !res.IsError {
		t.Errorf("failing tool = %+v, %v", res, err)
	}
	res, err = c.CallTool(ctx, run.ID, "echo_read", nil)
	if err != nil || res.IsError {
		t.Errorf("no args = %+v, %v", res, err)
	}
	if _, err := c.CallTool(ctx, run.ID, "echo_write", nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("hidden tool: %v", err)
	}
	if _, err := c.CallTool(ctx, run.ID, "echo_read", json.RawMessage(`{"text":`)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("malformed args: %v", err)
	}

	// The other tenant sees none of it.
	if _, err := other.GetSandbox(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("other tenant GetSandbox: %v", err)
	}
	if _, err := other.Tools(ctx, run.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("other tenant Tools: %v", err)
	}

	if err := c.DeleteRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tools(ctx, run.ID); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), run.ID) {
		t.Errorf("Tools after DeleteRun: %v", err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second DeleteSandbox: %v", err)
	}
	if _, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "bad id"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad conversation: %v", err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	c, _, _ := setup(t)
	bad, _ := New(c.base.String(), "nope")
	if _, err := bad.ListSandboxes(ctx, ""); !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "token") {
		t.Errorf("bad token: %v", err)
	}
	if _, err := New("localhost:7788", "x"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("address without scheme: %v", err)
	}
	// Nothing listens: unavailable, with an error message.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	down, _ := New(addr, "x")
	if err := down.Healthz(ctx); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("server down: %v", err)
	}
	// A proxy's non-JSON error page is classed by status.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	pc, _ := New(proxy.URL, "x")
	if err := pc.Healthz(ctx); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "502") {
		t.Errorf("proxy error: %v", err)
	}
	// A cancelled context is reported as such.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Healthz(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// GetRun reads back what CreateRun returned; a plan run says its surface
// is why the write tool is absent.
func TestGetRun(t *testing.T) {
	ctx := context.Background()
	c, other, _ := setup(t)
	run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "c1", Surface: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != run.ID || len(got.Tools) != 1 || got.Tools[0].Name != "echo_read" {
		t.Fatalf("GetRun: %+v", got)
	}
	if len(got.Unavailable) != 1 || got.Unavailable[0].Tools[0] != "echo_write" || !strings.Contains(got.Unavailable[0].Reason, `surface "plan"`) {
		t.Fatalf("unavailable: %+v", got.Unavailable)
	}
	if _, err := other.GetRun(ctx, run.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
}
