package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api/mcp"
	"github.com/sandboxd/sandboxd/questions"
)

// mcpDo sends one MCP POST to a run's endpoint.
func (h *harness) mcpDo(run, token, session, body string) answer {
	h.t.Helper()
	req, err := http.NewRequest("POST", h.http.URL+"/v1/runs/"+run+"/mcp", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(mcp.HeaderSession, session)
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: []byte(b.String())}
}

const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`

// TestMCPRoute: the endpoint takes the tokens the run's other endpoints
// take, hides other tenants' and runs' endpoints, lists the run's tools and
// calls them through the same path as POST /v1/runs/{id}/tools/{name}, and
// caps bodies as tool calls are capped.
func TestMCPRoute(t *testing.T) {
	rt := NewRunTokens()
	h := newHarness(t, WithRunTokens(rt), WithQuestions(questions.New()), WithBodyLimits(0, 4096))
	var own, other Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &own)
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c2"}`, 201, &other)
	runTok, err := rt.Issue("a", own.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, run, token string
		want             int
	}{
		{"no token", own.ID, "", 401},
		{"another tenant", own.ID, tokenB, 404},
		{"a run token on its own run", own.ID, runTok, 200},
		{"a run token on another run", other.ID, runTok, 404},
		{"no such run", "nope", tokenA, 404},
	} {
		if a := h.mcpDo(c.run, c.token, "", mcpInit); a.status != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, a.status, c.want, a.body)
		}
	}

	a := h.mcpDo(own.ID, tokenA, "", mcpInit)
	sid := a.header.Get(mcp.HeaderSession)
	if a.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	a = h.mcpDo(own.ID, tokenA, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var list struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil {
		t.Fatalf("tools/list: %s", a.body)
	}
	var specs []ToolSpec
	h.must("GET", "/v1/runs/"+own.ID+"/tools", tokenA, "", 200, &specs)
	if len(list.Result.Tools) != len(specs) {
		t.Fatalf("tools/list %s, run tools %+v", a.body, specs)
	}
	for i, s := range specs {
		if got := list.Result.Tools[i]; got.Name != s.Name || string(got.InputSchema) != string(s.InputSchema) {
			t.Errorf("tool %d = %s %s, want %s %s", i, got.Name, got.InputSchema, s.Name, s.InputSchema)
		}
	}

	var plain ToolResult
	h.must("POST", "/v1/runs/"+own.ID+"/tools/peek", tokenA, `{"path":"x"}`, 200, &plain)
	a = h.mcpDo(own.ID, tokenA, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"peek","arguments":{"path":"x"}}}`)
	want := `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":` + mustJSON(t, plain.Text()) + `}],"isError":false}}` + "\n"
	if string(a.body) != want {
		t.Errorf("tools/call peek = %s, want %s", a.body, want)
	}
	// The registry's schema still judges the arguments.
	a = h.mcpDo(own.ID, tokenA, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"peek","arguments":{"nope":1}}}`)
	if !strings.Contains(string(a.body), `"isError":true`) {
		t.Errorf("peek with an unknown argument = %s", a.body)
	}
	big := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"peek","arguments":{"path":"` + strings.Repeat("x", 5000) + `"}}}`
	if a := h.mcpDo(own.ID, tokenA, sid, big); a.status != 400 || !strings.Contains(string(a.body), "larger than 4096 bytes") {
		t.Errorf("a body over the tool call cap = %d %s", a.status, a.body)
	}

	// Deleting the run ends its sessions.
	h.must("DELETE", "/v1/runs/"+own.ID, tokenA, "", 204, nil)
	if n := h.srv.mcp.Sessions(); n != 0 {
		t.Errorf("%d MCP sessions left after the run was deleted", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
