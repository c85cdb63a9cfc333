package interp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools/eval"
)

func TestResultFields(t *testing.T) {
	r := result(map[string]string{
		"text/plain": "'hi'", "text/html": "<b>hi</b>", "image/png": "iVBORw0KGgo=",
		"application/json":                    `{"a": 1}`,
		"application/vnd.sandboxd.data+json":  `{"col": [1, 2]}`,
		"application/vnd.sandboxd.chart+json": `not json`,
		"text/x-custom":                       "custom",
	}, true)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	if got["type"] != "result" || got["is_main_result"] != true || got["text"] != "hi" || got["html"] != "<b>hi</b>" || got["png"] != "iVBORw0KGgo=" {
		t.Errorf("result = %s", b)
	}
	if j, _ := got["json"].(map[string]any); j["a"] != 1.0 {
		t.Errorf("json = %v, want the decoded object", got["json"])
	}
	if d, _ := got["data"].(map[string]any); d == nil {
		t.Errorf("data = %v, want the decoded columns", got["data"])
	}
	if _, ok := got["chart"]; ok {
		t.Errorf("chart that is not JSON was sent: %v", got["chart"])
	}
	if e, _ := got["extra"].(map[string]any); e["text/x-custom"] != "custom" {
		t.Errorf("extra = %v", got["extra"])
	}
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{`'a'`: "a", `"b"`: "b", `'`: `'`, `'c"`: `'c"`, "2": "2", "": ""} {
		if got := unquote(in); got != want {
			t.Errorf("unquote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLanguage(t *testing.T) {
	for in, want := range map[string]string{"": "python", "Python": "python", "js": "javascript", " JavaScript ": "javascript"} {
		if got, err := language(in); err != nil || got != want {
			t.Errorf("language(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := language("ts"); err == nil || !strings.Contains(err.Error(), "python and javascript") {
		t.Errorf("language(ts) = %v, want a sentence naming the languages served", err)
	}
}

// noSandboxes finds no sandbox; the routes answer before they need one.
type noSandboxes struct{}

func (noSandboxes) Get(context.Context, string, string) (sandbox.Info, error) {
	return sandbox.Info{}, errdefs.NotFound("sandbox x not found")
}

func (noSandboxes) AgentOf(context.Context, sandbox.Info) (*agent.Client, sandbox.Info, error) {
	return nil, sandbox.Info{}, errdefs.NotFound("sandbox x not found")
}

// idleKernels is a Kernels that is never reached in these tests.
type idleKernels struct{}

func (idleKernels) RunCell(context.Context, eval.Target, string, string, map[string]string, time.Duration, func(eval.CellOutput)) (eval.CellEnd, error) {
	return eval.CellEnd{}, nil
}
func (idleKernels) StartKernel(context.Context, eval.Target, string) error   { return nil }
func (idleKernels) RestartKernel(context.Context, eval.Target, string) error { return nil }
func (idleKernels) StopKernel(context.Context, eval.Target, string) error    { return nil }
func (idleKernels) ContextKernels(context.Context, *agent.Client) ([]eval.ContextKernel, error) {
	return nil, nil
}

func TestRoutes(t *testing.T) {
	var off *eval.Tool
	for _, c := range []struct {
		srv          *Server
		method, path string
		status       int
		says         string
	}{
		{New(noSandboxes{}, idleKernels{}), "GET", "/health", 200, "OK"},
		{New(noSandboxes{}, idleKernels{}), "GET", "/execute", 405, "takes POST"},
		{New(noSandboxes{}, idleKernels{}), "PUT", "/contexts", 405, "GET or POST"},
		{New(noSandboxes{}, idleKernels{}), "GET", "/contexts/abc", 405, "takes DELETE"},
		{New(noSandboxes{}, idleKernels{}), "POST", "/files", 404, "serves POST /execute"},
		{New(noSandboxes{}, idleKernels{}), "POST", "/execute", 404, "sandbox x not found"},
		{New(noSandboxes{}, off), "POST", "/execute", 503, "eval is off"},
	} {
		w := httptest.NewRecorder()
		c.srv.ServeSandbox(w, httptest.NewRequest(c.method, c.path, strings.NewReader(`{"code": "1"}`)), "t1", "x")
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%s %s = %d %q, want %d saying %q", c.method, c.path, w.Code, w.Body.String(), c.status, c.says)
		}
	}
}

func TestRegistryIsBounded(t *testing.T) {
	g := newRegistry(2)
	a := g.of("a")
	a.ctxs["x"] = ctxRecord{id: "x"}
	g.of("b")
	g.of("a") // a is used again: b is now the oldest
	g.of("c")
	if len(g.boxes) != 2 || g.boxes["b"] != nil || g.of("a").ctxs["x"].id != "x" {
		t.Errorf("after a, b, a, c with room for two: %v", g.boxes)
	}
}

func TestFailStatuses(t *testing.T) {
	s := New(noSandboxes{}, idleKernels{})
	for err, want := range map[error]int{
		errdefs.InvalidArgument("x"):    http.StatusBadRequest,
		errdefs.NotFound("x"):           http.StatusNotFound,
		errdefs.ResourceExhausted("x"):  http.StatusTooManyRequests,
		errdefs.Unavailable("x"):        http.StatusBadGateway,
		errdefs.FailedPrecondition("x"): http.StatusConflict,
	} {
		w := httptest.NewRecorder()
		s.fail(w, err)
		if w.Code != want {
			t.Errorf("%v answered %d, want %d", err, w.Code, want)
		}
	}
}
