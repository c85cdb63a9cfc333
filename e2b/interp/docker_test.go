package interp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/e2b/interp"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
)

var agentBin string

func TestMain(m *testing.M) { sandboxtest.Main(m, "SANDBOXD_TEST_DOCKER", &agentBin, nil) }

// rig is a real sandbox of the sandbox image with the code interpreter
// served over HTTP the way the E2B front calls it.
type rig struct {
	t       *testing.T
	url     string
	sandbox string
	// restart serves the sandbox from a new eval tool and server, as a
	// restarted sandboxd would.
	restart func()
}

func newRig(t *testing.T) *rig {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	be, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(sandboxtest.Image("sandboxd-sandbox:latest")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mgr := sandbox.NewManager(be)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tenant := fmt.Sprintf("interptest-%d", time.Now().UnixNano())
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
	g := &rig{t: t, sandbox: info.ID}
	var hs *httptest.Server
	g.restart = func() {
		if hs != nil {
			hs.Close()
		}
		tool := eval.New(tools.NewRegistry())
		t.Cleanup(tool.Close)
		srv := interp.New(mgr, tool, interp.WithMaxContexts(2))
		hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// As the front does: the sandbox from a header, the path as is.
			srv.ServeSandbox(w, r, tenant, r.Header.Get("E2b-Sandbox-Id"))
		}))
		t.Cleanup(hs.Close)
		g.url = hs.URL
	}
	g.restart()
	return g
}

func (g *rig) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("E2b-Sandbox-Id", g.sandbox)
	return http.DefaultClient.Do(req)
}

// call makes a request that must answer want, and returns the body.
func (g *rig) call(method, path string, body any, want int) []byte {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := g.do(ctx, method, path, body)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		g.t.Fatalf("%s %s answered %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	return b
}

// run executes a cell and returns its lines, keepalives left out.
func (g *rig) run(body map[string]any) []map[string]any {
	g.t.Helper()
	b := g.call(http.MethodPost, "/execute", body, http.StatusOK)
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			g.t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		if m["type"] != "keepalive" {
			lines = append(lines, m)
		}
	}
	if len(lines) == 0 || lines[len(lines)-1]["type"] != "end_of_execution" {
		g.t.Fatalf("the stream does not end with end_of_execution: %v", lines)
	}
	return lines
}

func of(lines []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

// mainText is the text of the cell's main result; the cell must not fail.
func (g *rig) mainText(body map[string]any) string {
	g.t.Helper()
	lines := g.run(body)
	if e := of(lines, "error"); len(e) > 0 {
		g.t.Fatalf("cell %v failed: %v", body["code"], e)
	}
	for _, r := range of(lines, "result") {
		if r["is_main_result"] == true {
			s, _ := r["text"].(string)
			return s
		}
	}
	g.t.Fatalf("cell %v has no main result: %v", body["code"], lines)
	return ""
}

func (g *rig) errorOf(body map[string]any) map[string]any {
	g.t.Helper()
	e := of(g.run(body), "error")
	if len(e) != 1 {
		g.t.Fatalf("cell %v: want one error line, got %v", body["code"], e)
	}
	return e[0]
}

func TestCodeInterpreter(t *testing.T) {
	g := newRig(t)

	t.Run("print", func(t *testing.T) {
		lines := g.run(map[string]any{"code": "print('hello'); import sys; print('oops', file=sys.stderr)"})
		out, errs := of(lines, "stdout"), of(lines, "stderr")
		if len(out) != 1 || out[0]["text"] != "hello\n" || len(errs) != 1 || errs[0]["text"] != "oops\n" {
			t.Fatalf("stdout %v, stderr %v; want hello and oops", out, errs)
		}
		if n := of(lines, "number_of_executions"); len(n) != 1 || n[0]["execution_count"].(float64) < 1 {
			t.Fatalf("number_of_executions = %v", n)
		}
	})

	t.Run("result", func(t *testing.T) {
		if got := g.mainText(map[string]any{"code": "1+1"}); got != "2" {
			t.Fatalf("1+1 = %q", got)
		}
		if got := g.mainText(map[string]any{"code": "'hi'"}); got != "hi" {
			t.Fatalf("a string result = %q, want its text without quotes", got)
		}
		lines := g.run(map[string]any{"code": "print('before')\ndisplay({'shown': True})\n3"})
		var kinds []string
		for _, l := range lines {
			switch l["type"] {
			case "stdout":
				kinds = append(kinds, "stdout "+fmt.Sprint(l["text"]))
			case "result":
				kinds = append(kinds, fmt.Sprintf("result %v main=%v", l["text"], l["is_main_result"]))
			}
		}
		if want := []string{"stdout before\n", "result {'shown': True} main=false", "result 3 main=true"}; !reflect.DeepEqual(kinds, want) {
			t.Fatalf("output = %q, want %q", kinds, want)
		}
	})

	t.Run("error", func(t *testing.T) {
		e := g.errorOf(map[string]any{"code": "def f():\n    raise ValueError('bad input')\nf()"})
		tb, _ := e["traceback"].(string)
		if e["name"] != "ValueError" || e["value"] != "bad input" || !strings.Contains(tb, "raise ValueError('bad input')") || !strings.Contains(tb, "in f") {
			t.Fatalf("error = %v", e)
		}
	})

	t.Run("env vars", func(t *testing.T) {
		code := "import os; os.environ.get('SANDBOXD_E2B_TEST', 'unset')"
		if got := g.mainText(map[string]any{"code": code, "env_vars": map[string]string{"SANDBOXD_E2B_TEST": "set"}}); got != "set" {
			t.Fatalf("with env_vars: %q", got)
		}
		if got := g.mainText(map[string]any{"code": code}); got != "unset" {
			t.Fatalf("the next cell still sees the variable: %q", got)
		}
	})

	t.Run("dataframe", func(t *testing.T) {
		lines := g.run(map[string]any{"code": "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})"})
		rs := of(lines, "result")
		if len(rs) != 1 {
			t.Fatalf("results %v", lines)
		}
		html, _ := rs[0]["html"].(string)
		if !strings.Contains(html, "<table") || !strings.Contains(html, "<td>x</td>") {
			t.Fatalf("html = %q", html)
		}
		want := map[string]any{"a": []any{1.0, 2.0}, "b": []any{"x", "y"}}
		if !reflect.DeepEqual(rs[0]["data"], want) {
			t.Fatalf("data = %v, want %v", rs[0]["data"], want)
		}
	})

	t.Run("matplotlib", func(t *testing.T) {
		lines := g.run(map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6], label='s')\nplt.title('Growth')\nplt.xlabel('day')\nplt.show()"})
		rs := of(lines, "result")
		if len(rs) != 1 {
			t.Fatalf("results %v", lines)
		}
		png, err := base64.StdEncoding.DecodeString(fmt.Sprint(rs[0]["png"]))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("png is not a PNG image (%v)", err)
		}
		chart, _ := rs[0]["chart"].(map[string]any)
		els, _ := chart["elements"].([]any)
		if chart["type"] != "line" || chart["title"] != "Growth" || chart["x_label"] != "day" || len(els) != 1 {
			t.Fatalf("chart = %v", chart)
		}
		el := els[0].(map[string]any)
		if el["label"] != "s" || !reflect.DeepEqual(el["points"], []any{[]any{1.0, 4.0}, []any{2.0, 5.0}, []any{3.0, 6.0}}) {
			t.Fatalf("chart element = %v", el)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		lines := g.run(map[string]any{"code": "console.log('from node'); 1+1", "language": "javascript"})
		out := of(lines, "stdout")
		if len(out) != 1 || out[0]["text"] != "from node\n" {
			t.Fatalf("stdout = %v", lines)
		}
		if got := g.mainText(map[string]any{"code": "[1, 2].map(x => x * 2)", "language": "js"}); got != "[ 2, 4 ]" {
			t.Fatalf("result = %q", got)
		}
		e := g.errorOf(map[string]any{"code": "null.x", "language": "javascript"})
		if e["name"] != "TypeError" || !strings.Contains(fmt.Sprint(e["value"]), "null") {
			t.Fatalf("error = %v", e)
		}
	})

	t.Run("contexts", func(t *testing.T) {
		var c struct{ ID, Language, Cwd string }
		if err := json.Unmarshal(g.call(http.MethodPost, "/contexts", map[string]any{"language": "python", "cwd": "/tmp"}, http.StatusOK), &c); err != nil {
			t.Fatal(err)
		}
		if c.ID == "" || c.Language != "python" || c.Cwd != "/tmp" {
			t.Fatalf("created %+v", c)
		}
		if e := of(g.run(map[string]any{"code": "secret = 41", "context_id": c.ID}), "error"); len(e) > 0 {
			t.Fatalf("setting a variable failed: %v", e)
		}
		if got := g.mainText(map[string]any{"code": "import os; (secret + 1, os.getcwd())", "context_id": c.ID}); got != "(42, '/tmp')" {
			t.Fatalf("in the context: %q", got)
		}
		if e := g.errorOf(map[string]any{"code": "secret"}); e["name"] != "NameError" {
			t.Fatalf("the default context sees the variable: %v", e)
		}
		var list []struct{ ID, Language string }
		_ = json.Unmarshal(g.call(http.MethodGet, "/contexts", nil, http.StatusOK), &list)
		ids := map[string]string{}
		for _, l := range list {
			ids[l.ID] = l.Language
		}
		if ids[c.ID] != "python" || ids["python"] != "python" || ids["javascript"] != "javascript" {
			t.Fatalf("list = %v", list)
		}
		// Over the cap of two: one sentence, no kernel.
		var c2 struct{ ID string }
		_ = json.Unmarshal(g.call(http.MethodPost, "/contexts", map[string]any{"language": "javascript"}, http.StatusOK), &c2)
		if b := g.call(http.MethodPost, "/contexts", map[string]any{}, http.StatusTooManyRequests); !strings.Contains(string(b), "the most allowed") {
			t.Fatalf("over the cap: %s", b)
		}
		// A restarted sandboxd finds the context by its kernel.
		g.restart()
		list = nil
		_ = json.Unmarshal(g.call(http.MethodGet, "/contexts", nil, http.StatusOK), &list)
		if len(list) != 4 {
			t.Fatalf("after a restart, list = %v", list)
		}
		if got := g.mainText(map[string]any{"code": "secret", "context_id": c.ID}); got != "41" {
			t.Fatalf("after a restart the context holds %q", got)
		}
		g.call(http.MethodPost, "/contexts/"+c.ID+"/restart", nil, http.StatusOK)
		if e := g.errorOf(map[string]any{"code": "secret", "context_id": c.ID}); e["name"] != "NameError" {
			t.Fatalf("the variable survived the restart: %v", e)
		}
		g.call(http.MethodDelete, "/contexts/"+c.ID, nil, http.StatusOK)
		g.call(http.MethodDelete, "/contexts/"+c2.ID, nil, http.StatusOK)
		list = nil
		_ = json.Unmarshal(g.call(http.MethodGet, "/contexts", nil, http.StatusOK), &list)
		if len(list) != 2 {
			t.Fatalf("after deleting both, list = %v", list)
		}
		if b := g.call(http.MethodPost, "/execute", map[string]any{"code": "1", "context_id": c.ID}, http.StatusNotFound); !strings.Contains(string(b), "not found") {
			t.Fatalf("a removed context: %s", b)
		}
	})

	t.Run("timeout interrupts the cell", func(t *testing.T) {
		if e := of(g.run(map[string]any{"code": "kept = 'still here'"}), "error"); len(e) > 0 {
			t.Fatalf("setting a variable failed: %v", e)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		res, err := g.do(ctx, http.MethodPost, "/execute", map[string]any{"code": "while True: pass"})
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the endless cell ended with %v, want the caller's deadline", err)
		}
		// The next cell runs only once the endless one stopped: the kernel
		// runs one cell at a time.
		if got := g.mainText(map[string]any{"code": "kept"}); got != "still here" {
			t.Fatalf("after the interrupt: %q", got)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		g.call(http.MethodPost, "/execute", map[string]any{"code": "1", "context_id": "python", "language": "python"}, http.StatusBadRequest)
		if b := g.call(http.MethodPost, "/execute", map[string]any{"code": "1", "language": "r"}, http.StatusBadRequest); !strings.Contains(string(b), "python and javascript") {
			t.Fatalf("language r: %s", b)
		}
		g.call(http.MethodPost, "/execute", map[string]any{"context_id": "python"}, http.StatusBadRequest)
		g.call(http.MethodPost, "/contexts", map[string]any{"cwd": "/no/such/folder"}, http.StatusBadRequest)
		g.call(http.MethodGet, "/nothing", nil, http.StatusNotFound)
		saved := g.sandbox
		g.sandbox = "no-such-sandbox"
		g.call(http.MethodPost, "/execute", map[string]any{"code": "1"}, http.StatusNotFound)
		g.sandbox = saved
	})
}
