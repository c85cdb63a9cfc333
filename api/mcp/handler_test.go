package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// fakeRuns is one tenant "t" with run "r1" (and whatever live holds).
type fakeRuns struct {
	mu      sync.Mutex // guards live and calls
	live    map[string]bool
	calls   []string
	blocked chan struct{} // closed when a "block" call started
}

func (f *fakeRuns) Live(ctx context.Context, tenant, run string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tenant != "t" || !f.live[run] {
		return errdefs.NotFound("run %q does not exist or has ended; create a run with POST /v1/runs", run)
	}
	return nil
}

func (f *fakeRuns) Tools(ctx context.Context, tenant, run string) ([]tools.Spec, error) {
	return []tools.Spec{
		{Name: "read", Description: "reads", Level: tools.LevelRead, InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "write", Description: "writes", Level: tools.LevelWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
	}, nil
}

func (f *fakeRuns) Call(ctx context.Context, tenant, run, name string, args json.RawMessage) (tools.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name+" "+string(args))
	f.mu.Unlock()
	switch name {
	case "read":
		return tools.Result{Content: []tools.Block{{Type: "text", Text: "1\thello"}, {Type: "image", MimeType: "image/png", Data: "iVBORw0KGgo="}}}, nil
	case "write":
		return tools.Error("permission denied: no human is connected to space \"ops\""), nil
	case "paused":
		return tools.Result{}, errdefs.FailedPrecondition("the sandbox is paused; unpause it")
	case "chatty":
		tools.EmitOutput(ctx, "stdout", "first\n")
		tools.EmitOutput(ctx, "stderr", "careful\n")
		tools.EmitOutput(ctx, "stdout", "second\n")
		return tools.Text("done"), nil
	case "block":
		close(f.blocked)
		<-ctx.Done()
		return tools.Result{}, errdefs.Unavailable("the call was cancelled")
	}
	return tools.Result{}, errdefs.NotFound("tool %q is not available to this run; list the run's tools to see which are", name)
}

type rig struct {
	t    *testing.T
	h    *Handler
	runs *fakeRuns
	srv  *httptest.Server
	now  time.Time
	mu   sync.Mutex // guards now
}

func newRig(t *testing.T, opts ...Option) *rig {
	rg := &rig{t: t, runs: &fakeRuns{live: map[string]bool{"r1": true, "r2": true}, blocked: make(chan struct{})}, now: time.Unix(1e9, 0)}
	opts = append([]Option{WithClock(func() time.Time { rg.mu.Lock(); defer rg.mu.Unlock(); return rg.now })}, opts...)
	rg.h = NewHandler(rg.runs, opts...)
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/runs/{id}/mcp", func(w http.ResponseWriter, r *http.Request) {
		rg.h.ServeRun(w, r, "t", r.PathValue("id"))
	})
	rg.srv = httptest.NewServer(mux)
	t.Cleanup(rg.srv.Close)
	return rg
}

func (rg *rig) advance(d time.Duration) { rg.mu.Lock(); rg.now = rg.now.Add(d); rg.mu.Unlock() }

// post sends body with the given headers and returns the status, headers
// and body.
func (rg *rig) post(run, body string, hdr ...string) (int, http.Header, string) {
	rg.t.Helper()
	return rg.do(http.MethodPost, run, body, hdr...)
}

func (rg *rig) do(method, run, body string, hdr ...string) (int, http.Header, string) {
	rg.t.Helper()
	req, err := http.NewRequest(method, rg.srv.URL+"/v1/runs/"+run+"/mcp", strings.NewReader(body))
	if err != nil {
		rg.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, resp.Header, sb.String()
}

// initialize opens a session asking for version and returns its id.
func (rg *rig) initialize(run, version string) string {
	rg.t.Helper()
	code, h, body := rg.post(run, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if code != 200 || h.Get(HeaderSession) == "" {
		rg.t.Fatalf("initialize = %d %q (session %q)", code, body, h.Get(HeaderSession))
	}
	return h.Get(HeaderSession)
}

func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m
}

func errCode(t *testing.T, body string) float64 {
	t.Helper()
	e, _ := decode(t, body)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("answer %q has no error", body)
	}
	return e["code"].(float64)
}

func TestInitializeNegotiatesTheRevision(t *testing.T) {
	rg := newRig(t)
	for asked, want := range map[string]string{"2025-06-18": "2025-06-18", "2025-03-26": "2025-03-26", "2099-01-01": "2025-06-18", "2024-11-05": "2025-06-18"} {
		code, h, body := rg.post("r1", `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"`+asked+`"}}`)
		res, _ := decode(t, body)["result"].(map[string]any)
		if code != 200 || res == nil || res["protocolVersion"] != want || h.Get(HeaderSession) == "" {
			t.Fatalf("asked %s: %d %s", asked, code, body)
		}
		caps := res["capabilities"].(map[string]any)["tools"].(map[string]any)
		if caps["listChanged"] != false {
			t.Errorf("capabilities = %v", res["capabilities"])
		}
	}
	if code, _, body := rg.post("r1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`); code != 200 || errCode(t, body) != CodeInvalidParams {
		t.Errorf("initialize without a version = %d %s", code, body)
	}
	if code, _, body := rg.post("gone", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`); code != 404 || !strings.Contains(body, "does not exist") {
		t.Errorf("initialize of a missing run = %d %s", code, body)
	}
}

func TestSessionHeaders(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250618)
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if code, _, body := rg.post("r1", ping); code != 400 || !strings.Contains(body, HeaderSession) {
		t.Errorf("ping without a session = %d %s", code, body)
	}
	// A newer client's probe before initialize learns the method is not here.
	if code, _, body := rg.post("r1", `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}`); code != 200 || errCode(t, body) != CodeMethodNotFound {
		t.Errorf("server/discover without a session = %d %s", code, body)
	}
	if code, _, body := rg.post("r1", ping, HeaderSession, "nope"); code != 404 {
		t.Errorf("ping with an unknown session = %d %s", code, body)
	}
	if code, _, body := rg.post("r2", ping, HeaderSession, sid); code != 404 {
		t.Errorf("a session used on another run = %d %s", code, body)
	}
	if code, _, body := rg.post("r1", ping, HeaderSession, sid, HeaderProtocol, "2099-01-01"); code != 400 || !strings.Contains(body, "not supported") {
		t.Errorf("an unknown protocol header = %d %s", code, body)
	}
	if code, _, body := rg.post("r1", ping, HeaderSession, sid, HeaderProtocol, Version20250326); code != 400 || !strings.Contains(body, "negotiated") {
		t.Errorf("another revision than negotiated = %d %s", code, body)
	}
	code, _, body := rg.post("r1", ping, HeaderSession, sid, HeaderProtocol, Version20250618)
	if code != 200 || body != "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n" {
		t.Errorf("ping = %d %q", code, body)
	}
	if code, _, body := rg.post("r1", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, HeaderSession, sid); code != 202 || body != "" {
		t.Errorf("a notification = %d %q", code, body)
	}
	if code, _, _ := rg.do(http.MethodGet, "r1", "", HeaderSession, sid); code != 405 {
		t.Errorf("GET = %d, want 405", code)
	}
	if code, _, _ := rg.do(http.MethodDelete, "r1", "", HeaderSession, sid); code != 204 {
		t.Errorf("DELETE = %d", code)
	}
	if code, _, _ := rg.post("r1", ping, HeaderSession, sid); code != 404 {
		t.Errorf("ping after DELETE = %d, want 404", code)
	}
}

func TestBadMessages(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250618)
	for _, c := range []struct {
		body   string
		status int
		code   float64
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, 400, CodeParseError},
		{`"hello"`, 400, CodeInvalidRequest},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, 400, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":3,"method":"resources/list"}`, 200, CodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 200, CodeInvalidParams},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read","arguments":[1]}}`, 200, CodeInvalidParams},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}`, 200, CodeInvalidParams},
		{`[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, 400, CodeInvalidRequest}, // no batches in 2025-06-18
	} {
		code, _, body := rg.post("r1", c.body, HeaderSession, sid)
		if code != c.status || errCode(t, body) != c.code {
			t.Errorf("%s: %d %s, want %d and code %v", c.body, code, body, c.status, c.code)
		}
	}
}

func TestBatchIn20250326(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250326)
	code, _, body := rg.post("r1", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}]`, HeaderSession, sid)
	var out []map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil || code != 200 || len(out) != 3 {
		t.Fatalf("batch = %d %s", code, body)
	}
	if out[0]["id"] != 1.0 || out[1]["id"] != 2.0 || out[2]["error"] == nil {
		t.Errorf("batch answers = %s", body)
	}
	if code, _, body := rg.post("r1", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, HeaderSession, sid); code != 202 || body != "" {
		t.Errorf("a batch of notifications = %d %q", code, body)
	}
	if code, _, body := rg.post("r1", `[]`, HeaderSession, sid); code != 400 || errCode(t, body) != CodeInvalidRequest {
		t.Errorf("an empty batch = %d %s", code, body)
	}
}

func TestToolsListAndCall(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250618)
	_, _, body := rg.post("r1", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, HeaderSession, sid)
	want := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` +
		`{"name":"read","description":"reads","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"annotations":{"readOnlyHint":true}},` +
		`{"name":"write","description":"writes","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}]}}` + "\n"
	if body != want {
		t.Errorf("tools/list =\n%s\nwant\n%s", body, want)
	}
	_, _, body = rg.post("r1", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"path":"a"}}}`, HeaderSession, sid)
	if want := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"1\thello"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"isError":false}}` + "\n"; body != want {
		t.Errorf("read = %s", body)
	}
	_, _, body = rg.post("r1", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write"}}`, HeaderSession, sid)
	if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "no human is connected") {
		t.Errorf("refused write = %s", body)
	}
	_, _, body = rg.post("r1", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"paused","arguments":null}}`, HeaderSession, sid)
	if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "paused; unpause it") {
		t.Errorf("a paused sandbox = %s", body)
	}
	rg.runs.mu.Lock()
	calls := strings.Join(rg.runs.calls, "|")
	rg.runs.mu.Unlock()
	if calls != `read {"path":"a"}|write {}|paused {}` {
		t.Errorf("calls reached the API as %s", calls)
	}
}

func TestStreamWhenOnlySSEIsAccepted(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250618)
	code, h, body := rg.post("r1", `{"jsonrpc":"2.0","id":9,"method":"ping"}`, HeaderSession, sid, "Accept", "text/event-stream")
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n") {
		t.Errorf("SSE ping = %d %s %q", code, h.Get("Content-Type"), body)
	}
	if code, _, _ := rg.post("r1", `{"jsonrpc":"2.0","id":9,"method":"ping"}`, HeaderSession, sid, "Accept", "text/html"); code != 406 {
		t.Errorf("Accept text/html = %d, want 406", code)
	}
}

func TestCancelledStopsTheCall(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250618)
	done := make(chan string, 1)
	go func() {
		_, _, body := rg.post("r1", `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"block"}}`, HeaderSession, sid)
		done <- body
	}()
	select {
	case <-rg.runs.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not start")
	}
	rg.post("r1", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`, HeaderSession, sid)
	select {
	case body := <-done:
		if !strings.Contains(body, "cancelled") {
			t.Errorf("cancelled call = %s", body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("notifications/cancelled did not stop the call")
	}
}

func TestSessionBoundsAndExpiry(t *testing.T) {
	rg := newRig(t, WithSessions(time.Minute, 2, 3))
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	a := rg.initialize("r1", Version20250618)
	rg.advance(time.Second)
	b := rg.initialize("r1", Version20250618)
	rg.advance(time.Second)
	c := rg.initialize("r1", Version20250618) // r1 holds 2: a, the least recently used, goes
	if code, _, _ := rg.post("r1", ping, HeaderSession, a); code != 404 {
		t.Errorf("the evicted session answers %d, want 404", code)
	}
	for _, s := range []string{b, c} {
		if code, _, _ := rg.post("r1", ping, HeaderSession, s); code != 200 {
			t.Errorf("session %s answers %d", s, code)
		}
	}
	rg.initialize("r2", Version20250618)
	code, _, body := rg.post("r2", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	if code != 429 || !strings.Contains(body, "cap") {
		t.Errorf("a fourth session = %d %s, want 429", code, body)
	}
	rg.advance(2 * time.Minute)
	if code, _, _ := rg.post("r1", ping, HeaderSession, b); code != 404 {
		t.Errorf("an expired session answers %d, want 404", code)
	}
	rg.initialize("r2", Version20250618) // the sweep made room
	if n := rg.h.Sessions(); n != 1 {
		t.Errorf("%d sessions held after the sweep, want 1", n)
	}

	// A run that ended drops its sessions.
	d := rg.initialize("r1", Version20250618)
	rg.runs.mu.Lock()
	delete(rg.runs.live, "r1")
	rg.runs.mu.Unlock()
	if code, _, _ := rg.post("r1", ping, HeaderSession, d); code != 404 {
		t.Errorf("a session of an ended run answers %d", code)
	}
	if n := rg.h.Sessions(); n != 1 {
		t.Errorf("%d sessions held after the run ended, want 1", n)
	}
	rg.h.DropRun("r2")
	if n := rg.h.Sessions(); n != 0 {
		t.Errorf("%d sessions held after DropRun, want 0", n)
	}
}

func TestBodyCapAndOrigin(t *testing.T) {
	rg := newRig(t, WithBodyReader(func(w http.ResponseWriter, r *http.Request) ([]byte, error) {
		return nil, errdefs.InvalidArgument("request body is larger than 10 bytes; send a smaller body")
	}))
	code, _, body := rg.post("r1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	if code != 400 || !strings.Contains(body, "larger than 10 bytes") {
		t.Errorf("over the cap = %d %s", code, body)
	}
	if code, _, _ := rg.post("r1", `{}`, "Origin", "http://evil.example"); code != 403 {
		t.Errorf("a foreign Origin = %d, want 403", code)
	}
}

// TestLongCallKeepsItsSession: a call that outlasts the session TTL is not
// cancelled by the expiry, and the TTL counts again from its end.
func TestLongCallKeepsItsSession(t *testing.T) {
	rg := newRig(t, WithSessions(time.Minute, 0, 0))
	sid := rg.initialize("r1", Version20250618)
	done := make(chan string, 1)
	go func() {
		_, _, body := rg.post("r1", `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"block"}}`, HeaderSession, sid)
		done <- body
	}()
	select {
	case <-rg.runs.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not start")
	}
	rg.advance(time.Hour)
	rg.initialize("r2", Version20250618) // sweeps
	select {
	case body := <-done:
		t.Fatalf("the sweep ended a call under way: %s", body)
	default:
	}
	if code, _, _ := rg.post("r1", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`, HeaderSession, sid); code != 202 {
		t.Fatalf("the busy session expired: %d", code)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not end")
	}
	if code, _, _ := rg.post("r1", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, HeaderSession, sid); code != 200 {
		t.Errorf("ping right after the long call = %d", code)
	}
}

// A call that asks for progress gets the tool's live output as
// notifications/progress on an SSE response, in order and growing, before its
// result; without a token the same call responds with plain JSON.
func TestProgressCarriesLiveOutput(t *testing.T) {
	rg := newRig(t)
	sid := rg.initialize("r1", Version20250618)
	code, h, body := rg.post("r1", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":{"progressToken":"tok-1"}}}`, HeaderSession, sid)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("call with a progress token = %d %s %q, want an SSE answer", code, h.Get("Content-Type"), body)
	}
	var got []string
	last := 0.0
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		m := decode(t, data)
		if m["method"] == "notifications/progress" {
			p := m["params"].(map[string]any)
			if p["progressToken"] != "tok-1" || p["progress"].(float64) <= last {
				t.Fatalf("progress %v after %v, token %v", p["progress"], last, p["progressToken"])
			}
			last = p["progress"].(float64)
			got = append(got, p["message"].(string))
			continue
		}
		if m["id"] != 5.0 || !strings.Contains(data, `"done"`) {
			t.Fatalf("the answer %s", data)
		}
		got = append(got, "result")
	}
	if want := "first\n|[stderr] careful\n|second\n|result"; strings.Join(got, "|") != want {
		t.Fatalf("stream %q, want %q", strings.Join(got, "|"), want)
	}
	code, h, body = rg.post("r1", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"chatty","arguments":{}}}`, HeaderSession, sid)
	if code != 200 || h.Get("Content-Type") != "application/json" || strings.Contains(body, "progress") {
		t.Fatalf("call without a token = %d %s %q, want plain JSON", code, h.Get("Content-Type"), body)
	}
	code, h, _ = rg.post("r1", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":{"progressToken":7}}}`, HeaderSession, sid, "Accept", "application/json")
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("a client that takes only JSON = %d %s, want plain JSON even with a token", code, h.Get("Content-Type"))
	}
}
