package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/tools"
)

func toolNames(specs []ToolSpec) string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestUnauthenticated(t *testing.T) {
	h := newHarness(t)
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, &sb)
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)

	endpoints := [][2]string{
		{"POST", "/v1/sandboxes"}, {"GET", "/v1/sandboxes"}, {"GET", "/v1/sandboxes/" + sb.ID},
		{"DELETE", "/v1/sandboxes/" + sb.ID}, {"POST", "/v1/runs"}, {"GET", "/v1/runs/" + run.ID}, {"GET", "/v1/runs/" + run.ID + "/tools"},
		{"POST", "/v1/runs/" + run.ID + "/tools/peek"}, {"DELETE", "/v1/runs/" + run.ID},
	}
	for _, tok := range []string{"", "wrong-token", tokenA + "x"} {
		for _, e := range endpoints {
			a := h.do(e[0], e[1], tok, `{"conversation":"c2"}`)
			if a.status != 401 {
				t.Errorf("%s %s with token %q: status %d, want 401", e[0], e[1], tok, a.status)
				continue
			}
			if got := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("%s %s: WWW-Authenticate = %q", e[0], e[1], got)
			}
			if eb := a.errBody(t); eb.Code != "unauthenticated" || !strings.Contains(eb.Message, "Bearer") && !strings.Contains(eb.Message, "token") {
				t.Errorf("%s %s: error %+v", e[0], e[1], eb)
			}
		}
	}
	// A Basic header is not a bearer token.
	req, _ := http.NewRequest("GET", h.http.URL+"/v1/sandboxes", nil)
	req.SetBasicAuth("a", tokenA)
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("basic auth: status %d", resp.StatusCode)
	}
	// Nothing was changed by the refused requests.
	if h.sb.count() != 1 {
		t.Errorf("sandboxes = %d, want 1", h.sb.count())
	}
	h.must("GET", "/v1/runs/"+run.ID+"/tools", tokenA, "", 200, nil)
	// The operations endpoints need no token.
	for _, p := range []string{"/healthz", "/readyz"} {
		if a := h.do("GET", p, "", ""); a.status != 200 {
			t.Errorf("%s: status %d", p, a.status)
		}
	}
}

// Tenant B gets 404 on every endpoint for tenant A's objects, and the 404
// reads the same as for an id that never existed.
func TestTenantIsolation(t *testing.T) {
	h := newHarness(t)
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, &sb)
	var runA Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &runA)
	if !strings.Contains(toolNames(runA.Tools), "poke") {
		t.Fatalf("A's run lacks sandbox tools: %s", toolNames(runA.Tools))
	}

	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/sandboxes/" + sb.ID, ""},
		{"DELETE", "/v1/sandboxes/" + sb.ID, ""},
		{"GET", "/v1/runs/" + runA.ID, ""},
		{"GET", "/v1/runs/" + runA.ID + "/tools", ""},
		{"POST", "/v1/runs/" + runA.ID + "/tools/peek", `{}`},
		{"POST", "/v1/runs/" + runA.ID + "/tools/poke", `{"path":"x"}`},
		{"DELETE", "/v1/runs/" + runA.ID, ""},
		{"POST", "/v1/runs", `{"conversation":"c1","parent":"` + runA.ID + `"}`},
	} {
		a := h.do(tc.method, tc.path, tokenB, tc.body)
		if a.status != 404 {
			t.Errorf("B %s %s: status %d, want 404: %s", tc.method, tc.path, a.status, a.body)
			continue
		}
		eb := a.errBody(t)
		if eb.Code != "not_found" {
			t.Errorf("B %s %s: code %s", tc.method, tc.path, eb.Code)
		}
		// Same response as for an object that does not exist at all.
		ghostPath := strings.NewReplacer(sb.ID, "sb-404", runA.ID, "run_404").Replace(tc.path)
		ghostBody := strings.ReplaceAll(tc.body, runA.ID, "run_404")
		ghost := h.do(tc.method, ghostPath, tokenA, ghostBody).errBody(t)
		norm := strings.NewReplacer(sb.ID, "ID", runA.ID, "ID", "sb-404", "ID", "run_404", "ID")
		if norm.Replace(eb.Message) != norm.Replace(ghost.Message) {
			t.Errorf("B %s %s: message %q differs from a missing object's %q", tc.method, tc.path, eb.Message, ghost.Message)
		}
	}

	// B's listings do not show A's sandbox.
	var list []Sandbox
	h.must("GET", "/v1/sandboxes", tokenB, "", 200, &list)
	h.must("GET", "/v1/sandboxes?conversation=c1", tokenB, "", 200, &list)
	if len(list) != 0 {
		t.Errorf("B lists %v", list)
	}
	// B's run in a conversation of the same name does not reach A's sandbox.
	var runB Run
	h.must("POST", "/v1/runs", tokenB, `{"conversation":"c1"}`, 201, &runB)
	if toolNames(runB.Tools) != "peek" {
		t.Errorf("B's run sees %s, want only peek", toolNames(runB.Tools))
	}
	var res ToolResult
	h.must("POST", "/v1/runs/"+runB.ID+"/tools/peek", tokenB, `{}`, 200, &res)
	if !strings.Contains(res.Content[0].Text, "sandbox=false") {
		t.Errorf("B's peek: %s", res.Content[0].Text)
	}
	if a := h.do("POST", "/v1/runs/"+runB.ID+"/tools/poke", tokenB, `{"path":"x"}`); a.status != 404 {
		t.Errorf("B's poke: status %d", a.status)
	}

	// A's objects are untouched and still A's.
	h.must("GET", "/v1/sandboxes/"+sb.ID, tokenA, "", 200, nil)
	h.must("GET", "/v1/sandboxes?conversation=c1", tokenA, "", 200, &list)
	if len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("A lists %v", list)
	}
	h.must("POST", "/v1/runs/"+runA.ID+"/tools/poke", tokenA, `{"path":"x"}`, 200, &res)
	if res.IsError {
		t.Errorf("A's poke: %+v", res)
	}
	h.must("DELETE", "/v1/runs/"+runA.ID, tokenA, "", 204, nil)
	h.must("DELETE", "/v1/sandboxes/"+sb.ID, tokenA, "", 204, nil)
}

func TestSandboxLifecycle(t *testing.T) {
	h := newHarness(t, WithDefaultImage("img:default"))
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1","env":{"A":"1"},"resources":{"cpus":1.5,"memory_mb":512,"pids":64}}`, 201, &sb)
	if sb.ID == "" || sb.Conversation != "c1" || sb.Backend != "fake" || sb.Image != "img:default" || sb.State != "running" || sb.CreatedAt.IsZero() {
		t.Errorf("created %+v", sb)
	}
	spec := h.sb.lastSpec
	if spec.Tenant != "a" || spec.Network != "none" || spec.Env["A"] != "1" || spec.Resources.CPUs != 1.5 || spec.Resources.MemoryMB != 512 || spec.Resources.Pids != 64 {
		t.Errorf("spec %+v", spec)
	}
	// The raw JSON has exactly the contract's field names.
	a := h.do("GET", "/v1/sandboxes/"+sb.ID, tokenA, "")
	var raw map[string]any
	json.Unmarshal(a.body, &raw)
	for _, k := range []string{"id", "conversation", "backend", "image", "state", "created_at"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("GET sandbox lacks %q: %s", k, a.body)
		}
	}

	a = h.do("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`)
	if a.status != 409 || a.errBody(t).Code != "conflict" {
		t.Errorf("second create: %d %s", a.status, a.body)
	}
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c2","image":"other:1","network":"bridge"}`, 201, &sb)
	if sb.Image != "other:1" || h.sb.lastSpec.Network != "bridge" {
		t.Errorf("c2: %+v %+v", sb, h.sb.lastSpec)
	}
	var list []Sandbox
	h.must("GET", "/v1/sandboxes", tokenA, "", 200, &list)
	if len(list) != 2 {
		t.Errorf("list = %v", list)
	}
	h.must("GET", "/v1/sandboxes?conversation=c2", tokenA, "", 200, &list)
	if len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("list c2 = %v", list)
	}
	h.must("DELETE", "/v1/sandboxes/"+sb.ID, tokenA, "", 204, nil)
	if a := h.do("GET", "/v1/sandboxes/"+sb.ID, tokenA, ""); a.status != 404 {
		t.Errorf("after delete: %d", a.status)
	}
	if a := h.do("DELETE", "/v1/sandboxes/"+sb.ID, tokenA, ""); a.status != 404 {
		t.Errorf("second delete: %d", a.status)
	}
	// An empty list is [], never null.
	a = h.do("GET", "/v1/sandboxes?conversation=none-here", tokenA, "")
	if strings.TrimSpace(string(a.body)) != "[]" {
		t.Errorf("empty list body = %s", a.body)
	}
}

func TestRunsAndTools(t *testing.T) {
	h := newHarness(t)
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	if run.ID == "" || run.Conversation != "c1" || run.Surface != "default" || toolNames(run.Tools) != "peek" {
		t.Errorf("run without sandbox: %+v", run)
	}
	if h.sb.count() != 0 || h.sb.agentCalls != 0 {
		t.Errorf("creating a run touched sandboxes: %d created, %d agent calls", h.sb.count(), h.sb.agentCalls)
	}
	// The contract's field names, tools included.
	a := h.do("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`)
	var raw map[string]json.RawMessage
	json.Unmarshal(a.body, &raw)
	for _, k := range []string{"id", "conversation", "surface", "tools"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("POST run lacks %q: %s", k, a.body)
		}
	}
	var specs []map[string]any
	json.Unmarshal(raw["tools"], &specs)
	for _, k := range []string{"name", "description", "level", "parallel_safe", "input_schema"} {
		if _, ok := specs[0][k]; !ok {
			t.Errorf("ToolSpec lacks %q: %s", k, raw["tools"])
		}
	}

	// A tool for a conversation without a sandbox creates none.
	if a := h.do("POST", "/v1/runs/"+run.ID+"/tools/poke", tokenA, `{"path":"f"}`); a.status != 404 {
		t.Errorf("poke without sandbox: %d %s", a.status, a.body)
	}
	if h.sb.count() != 0 {
		t.Error("a tool call created a sandbox")
	}

	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, nil)
	var list []ToolSpec
	h.must("GET", "/v1/runs/"+run.ID+"/tools", tokenA, "", 200, &list)
	if toolNames(list) != "peek,poke,shellish" {
		t.Errorf("tools with sandbox = %s", toolNames(list))
	}
	var res ToolResult
	h.must("POST", "/v1/runs/"+run.ID+"/tools/poke", tokenA, `{"path":"f"}`, 200, &res)
	if res.IsError || res.Content[0].Text != "wrote in sb-1 at /workspace" {
		t.Errorf("poke = %+v", res)
	}
	// Bad arguments are for the model: 200 with is_error.
	h.must("POST", "/v1/runs/"+run.ID+"/tools/poke", tokenA, `{"path":5}`, 200, &res)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "path") {
		t.Errorf("poke with bad args = %+v", res)
	}
	// An empty body means no arguments.
	h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, "", 200, &res)
	if res.IsError || !strings.Contains(res.Content[0].Text, "args={}") {
		t.Errorf("peek, empty body = %+v", res)
	}

	// Plan and readonly runs see read tools only; a hidden tool is 404.
	for _, surface := range []string{"plan", "readonly"} {
		var pr Run
		h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1","surface":"`+surface+`"}`, 201, &pr)
		if pr.Surface != surface || toolNames(pr.Tools) != "peek" {
			t.Errorf("%s run: %+v", surface, pr)
		}
		for _, name := range []string{"poke", "shellish"} {
			a := h.do("POST", "/v1/runs/"+pr.ID+"/tools/"+name, tokenA, `{"path":"f"}`)
			if a.status != 404 || a.errBody(t).Code != "not_found" {
				t.Errorf("%s run, %s: %d %s", surface, name, a.status, a.body)
			}
		}
	}

	if a := h.do("POST", "/v1/runs/"+run.ID+"/tools/no_such_tool", tokenA, `{}`); a.status != 404 {
		t.Errorf("unknown tool: %d", a.status)
	}
	h.must("DELETE", "/v1/runs/"+run.ID, tokenA, "", 204, nil)
	for _, e := range [][2]string{{"GET", "/v1/runs/" + run.ID + "/tools"}, {"POST", "/v1/runs/" + run.ID + "/tools/peek"}, {"DELETE", "/v1/runs/" + run.ID}} {
		if a := h.do(e[0], e[1], tokenA, ""); a.status != 404 || !strings.Contains(a.errBody(t).Message, run.ID) {
			t.Errorf("%s %s after delete: %d %s", e[0], e[1], a.status, a.body)
		}
	}
}

// On the host backend the workspace is a host folder: "/workspace" in a run
// means that folder when a tool is called, while the run keeps what was given.
func TestWorkdirResolvesToWorkspace(t *testing.T) {
	h := newHarness(t)
	h.sb.workspace = "/data/workspaces/a/c1"
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, nil)
	for _, tc := range []struct{ give, stored, seen string }{
		{"", "/workspace", "/data/workspaces/a/c1"},
		{"/workspace", "/workspace", "/data/workspaces/a/c1"},
		{"/workspace/sub/dir", "/workspace/sub/dir", "/data/workspaces/a/c1/sub/dir"},
		{"/data/workspaces/a/c1/x", "/data/workspaces/a/c1/x", "/data/workspaces/a/c1/x"},
	} {
		body := `{"conversation":"c1"}`
		if tc.give != "" {
			body = `{"conversation":"c1","workdir":"` + tc.give + `"}`
		}
		var run Run
		h.must("POST", "/v1/runs", tokenA, body, 201, &run)
		if run.Workdir != tc.stored {
			t.Errorf("workdir %q stored as %q, want %q", tc.give, run.Workdir, tc.stored)
		}
		var res ToolResult
		h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{}`, 200, &res)
		if !strings.Contains(res.Content[0].Text, "workdir="+tc.seen+" ") {
			t.Errorf("workdir %q seen as %s, want %s", tc.give, res.Content[0].Text, tc.seen)
		}
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, WithBodyLimits(1024, 4096))
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	big := `{"conversation":"c1","image":"` + strings.Repeat("x", 2000) + `"}`
	bigArgs := `{"path":"` + strings.Repeat("x", 5000) + `"}`
	call := "/v1/runs/" + run.ID + "/tools/peek"

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
		want                     []string
	}{
		{"malformed", "POST", "/v1/sandboxes", `{"conversation": "c1"`, 400, "invalid_argument", []string{"ends in the middle"}},
		{"syntax error", "POST", "/v1/runs", `{"conversation": 'c1'}`, 400, "invalid_argument", []string{"not valid JSON", "offset"}},
		{"wrong type", "POST", "/v1/runs", `{"conversation": "c1", "vibe": "yes"}`, 400, "invalid_argument", []string{`"vibe"`, "true or false"}},
		{"wrong nested type", "POST", "/v1/sandboxes", `{"conversation": "c1", "resources": {"memory_mb": "2G"}}`, 400, "invalid_argument", []string{`"resources.memory_mb"`}},
		{"unknown field", "POST", "/v1/runs", `{"conversation": "c1", "surfce": "plan"}`, 400, "invalid_argument", []string{`"surfce"`, "not known"}},
		{"not an object", "POST", "/v1/sandboxes", `["c1"]`, 400, "invalid_argument", []string{"array"}},
		{"empty body", "POST", "/v1/sandboxes", ``, 400, "invalid_argument", []string{"empty"}},
		{"oversized control", "POST", "/v1/sandboxes", big, 400, "invalid_argument", []string{"larger than 1024 bytes"}},
		{"oversized tool call", "POST", call, bigArgs, 400, "invalid_argument", []string{"larger than 4096 bytes"}},
		{"tool args not object", "POST", call, `[1]`, 400, "invalid_argument", []string{"array"}},
		{"tool args malformed", "POST", call, `{"path":}`, 400, "invalid_argument", []string{"not valid JSON"}},
		{"missing conversation", "POST", "/v1/sandboxes", `{}`, 400, "invalid_argument", []string{"conversation id"}},
		{"conversation with slash", "POST", "/v1/sandboxes", `{"conversation":"../etc"}`, 400, "invalid_argument", []string{"conversation id", "letters"}},
		{"conversation too long", "POST", "/v1/runs", `{"conversation":"` + strings.Repeat("c", 200) + `"}`, 400, "invalid_argument", []string{"conversation id"}},
		{"conversation query", "GET", "/v1/sandboxes?conversation=a%20b", ``, 400, "invalid_argument", []string{"conversation id"}},
		{"bad surface", "POST", "/v1/runs", `{"conversation":"c1","surface":"admin"}`, 400, "invalid_argument", []string{`"admin"`, "plan"}},
		{"bad approval", "POST", "/v1/runs", `{"conversation":"c1","approval":"never"}`, 400, "invalid_argument", []string{`"never"`}},
		{"relative workdir out", "POST", "/v1/runs", `{"conversation":"c1","workdir":"src/../../etc"}`, 400, "invalid_argument", []string{`workdir "/etc" is outside the workspace`, `"/workspace"`}},
		{"workdir /etc", "POST", "/v1/runs", `{"conversation":"c1","workdir":"/etc"}`, 400, "invalid_argument", []string{`workdir "/etc" is outside the workspace`}},
		{"workdir NUL", "POST", "/v1/runs", `{"conversation":"c1","workdir":"src\u0000"}`, 400, "invalid_argument", []string{"workdir", "NUL"}},
		{"ask without space", "POST", "/v1/runs", `{"conversation":"c1","approval":"ask"}`, 400, "invalid_argument", []string{`approval "ask" needs a space`, `"space"`}},
		{"unclean workdir", "POST", "/v1/runs", `{"conversation":"c1","workdir":"/workspace/../etc"}`, 400, "invalid_argument", []string{"workdir"}},
		{"bad space", "POST", "/v1/runs", `{"conversation":"c1","space":"a/b"}`, 400, "invalid_argument", []string{"space"}},
		{"bad network", "POST", "/v1/sandboxes", `{"conversation":"c1","network":"host"}`, 400, "invalid_argument", []string{`"host"`}},
		{"negative resources", "POST", "/v1/sandboxes", `{"conversation":"c1","resources":{"cpus":-1}}`, 400, "invalid_argument", []string{"negative"}},
		{"unknown parent", "POST", "/v1/runs", `{"conversation":"c1","parent":"run_nope"}`, 404, "not_found", []string{"run_nope"}},
		{"unknown run", "GET", "/v1/runs/run_nope/tools", ``, 404, "not_found", []string{"run_nope"}},
		{"unknown run get", "GET", "/v1/runs/run_nope", ``, 404, "not_found", []string{"run_nope"}},
		{"unknown run call", "POST", "/v1/runs/run_nope/tools/peek", `{}`, 404, "not_found", []string{"run_nope"}},
		{"unknown tool", "POST", "/v1/runs/" + run.ID + "/tools/nope", `{}`, 404, "not_found", []string{"nope"}},
		{"unknown sandbox", "GET", "/v1/sandboxes/sb-nope", ``, 404, "not_found", []string{"sb-nope"}},
		{"unknown endpoint", "GET", "/v1/nothing", ``, 404, "not_found", []string{"/v1/nothing"}},
		{"wrong method", "PUT", "/v1/runs", `{}`, 404, "not_found", []string{"PUT /v1/runs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := h.do(tc.method, tc.path, tokenA, tc.body)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			eb := a.errBody(t)
			if eb.Code != tc.code {
				t.Errorf("code %s, want %s", eb.Code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(eb.Message, w) {
					t.Errorf("message %q lacks %q", eb.Message, w)
				}
			}
			if strings.Contains(eb.Message, "\n") {
				t.Errorf("message spans lines: %q", eb.Message)
			}
		})
	}
	if h.sb.count() != 0 {
		t.Errorf("bad requests created %d sandboxes", h.sb.count())
	}
}

func TestRunValidation(t *testing.T) {
	h := newHarness(t, WithRuns(runstore.New(runstore.WithMaxPerTenant(2))))
	var parent, child Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1","vibe":true,"space":"s1","approval":"ask"}`, 201, &parent)
	if !parent.Vibe || parent.Space != "s1" || parent.Approval != "ask" {
		t.Errorf("run = %+v", parent)
	}
	a := h.do("POST", "/v1/runs", tokenA, `{"conversation":"c2","parent":"`+parent.ID+`"}`)
	if a.status != 400 || !strings.Contains(a.errBody(t).Message, "parent's conversation") {
		t.Errorf("child in another conversation: %d %s", a.status, a.body)
	}
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1","parent":"`+parent.ID+`"}`, 201, &child)
	if child.Parent != parent.ID {
		t.Errorf("child = %+v", child)
	}
	a = h.do("POST", "/v1/runs", tokenA, `{"conversation":"c3"}`)
	if a.status != 429 || a.errBody(t).Code != "resource_exhausted" {
		t.Errorf("third run: %d %s", a.status, a.body)
	}
	// The cap is per tenant.
	h.must("POST", "/v1/runs", tokenB, `{"conversation":"c3"}`, 201, nil)
	// Ending the parent ends its child and frees both places.
	h.must("DELETE", "/v1/runs/"+parent.ID, tokenA, "", 204, nil)
	if a := h.do("GET", "/v1/runs/"+child.ID+"/tools", tokenA, ""); a.status != 404 {
		t.Errorf("child after parent ended: %d", a.status)
	}
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c3"}`, 201, nil)
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c4"}`, 201, nil)
}

func TestBackendErrors(t *testing.T) {
	runs := runstore.New()
	h := newHarness(t, WithRuns(runs))
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	h.sb.mu.Lock()
	h.sb.lookupErr = errdefs.Unavailable("the docker engine does not answer; retry when it is back")
	h.sb.mu.Unlock()
	a := h.do("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`)
	if a.status != 503 || a.errBody(t).Code != "unavailable" || !strings.Contains(a.errBody(t).Message, "docker engine") {
		t.Errorf("run while engine is down: %d %s", a.status, a.body)
	}
	if a := h.do("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{}`); a.status != 503 {
		t.Errorf("call while engine is down: %d %s", a.status, a.body)
	}
	h.sb.mu.Lock()
	h.sb.lookupErr = nil
	h.sb.mu.Unlock()
	// The failed create left no run behind: only the first one counts.
	if n := runs.Active(); n != 1 {
		t.Errorf("active runs = %d, want 1", n)
	}
	h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{}`, 200, nil)
}

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{errdefs.InvalidArgument("x"), 400},
		{errdefs.Unauthenticated("x"), 401},
		{errdefs.NotFound("x"), 404},
		{errdefs.Conflict("x"), 409},
		{errdefs.FailedPrecondition("x"), 412},
		{errdefs.ResourceExhausted("x"), 429},
		{errdefs.Internal("x"), 500},
		{errdefs.Unavailable("x"), 503},
		{errdefs.DeadlineExceeded("x"), 504},
		{fmt.Errorf("wrapped: %w", errdefs.NotFound("x")), 404},
		{context.DeadlineExceeded, 504},
		{errors.New("plain"), 500},
	} {
		if got := StatusOf(tc.err); got != tc.want {
			t.Errorf("StatusOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// panicTools panics in Visible, standing in for a handler bug.
type panicTools struct{ *tools.Registry }

func (panicTools) Visible(*tools.Env) []tools.Spec { panic("boom") }

func TestPanicAnswers500AndIsLogged(t *testing.T) {
	var logBuf syncBuffer
	a, _ := ParseTenantToken("a", HashToken(tokenA))
	srv := New(newLeaky(), panicTools{tools.NewRegistry()}, NewTokenAuth(a), WithLogger(slog.New(slog.NewJSONHandler(&logBuf, nil))))
	h := &harness{t: t, srv: srv}
	h.http = newTestServer(t, srv)
	ans := h.do("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`)
	if ans.status != 500 {
		t.Fatalf("status %d: %s", ans.status, ans.body)
	}
	eb := ans.errBody(t)
	rid := ans.header.Get(HeaderRequestID)
	if eb.Code != "internal" || rid == "" || !strings.Contains(eb.Message, rid) {
		t.Errorf("error %+v, request id %q", eb, rid)
	}
	logs := logBuf.String()
	if !strings.Contains(logs, `"handler panic"`) || !strings.Contains(logs, "boom") || !strings.Contains(logs, rid) {
		t.Errorf("panic not logged: %s", logs)
	}
	// The server still responds.
	if ans := h.do("GET", "/healthz", "", ""); ans.status != 200 {
		t.Errorf("healthz after panic: %d", ans.status)
	}
}

type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRequestLogAndID(t *testing.T) {
	var logBuf syncBuffer
	h := newHarness(t, WithLogger(slog.New(slog.NewJSONHandler(&logBuf, nil))))
	req, _ := http.NewRequest("POST", h.http.URL+"/v1/runs", strings.NewReader(`{"conversation":"c1"}`))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set(HeaderRequestID, "caller-id-42")
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(HeaderRequestID); got != "caller-id-42" {
		t.Errorf("request id = %q, want the caller's", got)
	}
	// A made-up id is replaced, so it cannot forge log lines.
	req, _ = http.NewRequest("GET", h.http.URL+"/healthz", nil)
	req.Header.Set(HeaderRequestID, "forged\" level=ERROR")
	resp, err = h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(HeaderRequestID); got == "" || strings.Contains(got, "forged") {
		t.Errorf("request id = %q", got)
	}
	var line map[string]any
	for _, l := range strings.Split(logBuf.String(), "\n") {
		if strings.Contains(l, "caller-id-42") {
			json.Unmarshal([]byte(l), &line)
		}
	}
	if line["tenant"] != "a" || line["method"] != "POST" || line["path"] != "/v1/runs" || line["route"] != "POST /v1/runs" || line["status"] != float64(201) || line["duration"] == nil {
		t.Errorf("log line = %v", line)
	}
	if strings.Contains(logBuf.String(), tokenA) {
		t.Error("a token was logged")
	}
}

type recordingObserver struct {
	mu     sync.Mutex // guards routes and runs
	routes []string
	runs   int
}

func (o *recordingObserver) ObserveHTTP(route, method string, code int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.routes = append(o.routes, fmt.Sprintf("%s|%d", route, code))
}

func (o *recordingObserver) RunCreated() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runs++
}

type fakePinger struct{ err error }

func (p fakePinger) Ping(ctx context.Context) error { return p.err }

func TestOperationsEndpoints(t *testing.T) {
	obs := &recordingObserver{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxd_test_total", Help: "test"}))
	h := newHarness(t, WithObserver(obs), WithGatherer(reg), WithPinger(fakePinger{errors.New("engine down")}))

	if a := h.do("GET", "/healthz", "", ""); a.status != 200 || !strings.Contains(string(a.body), `"ok"`) {
		t.Errorf("healthz: %d %s", a.status, a.body)
	}
	if a := h.do("GET", "/readyz", "", ""); a.status != 503 || !strings.Contains(a.errBody(t).Message, "engine down") {
		t.Errorf("readyz with engine down: %d %s", a.status, a.body)
	}
	if a := h.do("GET", "/metrics", "", ""); a.status != 200 || !strings.Contains(string(a.body), "sandboxd_test_total") {
		t.Errorf("metrics: %d %s", a.status, a.body)
	}
	if a := h.do("GET", "/ui/", "", ""); a.status != 200 || !strings.Contains(string(a.body), "<h1>sandboxd</h1>") {
		t.Errorf("ui: %d %s", a.status, a.body)
	}
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	h.do("GET", "/v1/runs/"+run.ID+"/tools", tokenA, "")
	h.do("GET", "/v1/runs/run_x/tools", tokenA, "")
	h.do("GET", "/no/such/"+run.ID, tokenA, "")

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.runs != 1 {
		t.Errorf("runs created = %d", obs.runs)
	}
	got := strings.Join(obs.routes, " ")
	for _, w := range []string{"GET /healthz|200", "GET /readyz|503", "POST /v1/runs|201", "GET /v1/runs/{id}/tools|200", "GET /v1/runs/{id}/tools|404", "/|404"} {
		if !strings.Contains(got, w) {
			t.Errorf("observed routes %q lack %q", got, w)
		}
	}
	if strings.Contains(got, run.ID) {
		t.Errorf("a raw path reached the route label: %s", got)
	}
}
