package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// approval "ask" without a space is refused where the mistake is made,
// and no run is left behind.
func TestAskNeedsSpace(t *testing.T) {
	h := newHarness(t)
	a := h.do("POST", "/v1/runs", tokenA, `{"conversation":"c1","approval":"ask"}`)
	if a.status != 400 {
		t.Fatalf("status %d, want 400: %s", a.status, a.body)
	}
	if eb := a.errBody(t); eb.Code != "invalid_argument" || !strings.Contains(eb.Message, `approval "ask" needs a space`) || !strings.Contains(eb.Message, `"space"`) {
		t.Errorf("error %+v", eb)
	}
	var runs []RunSummary
	h.must("GET", "/v1/runs", tokenA, "", 200, &runs)
	if len(runs) != 0 {
		t.Errorf("a refused run was kept: %+v", runs)
	}
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1","approval":"ask","space":"desk"}`, 201, &run)
	if run.Approval != "ask" || run.Space != "desk" {
		t.Errorf("run %+v", run)
	}
	// "auto" needs no space.
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1","approval":"auto"}`, 201, nil)
}

// A workdir must lie in the workspace: "/workspace" (or under it) before
// the conversation has a sandbox; after, also the sandbox's own workspace
// root. A relative workdir is taken from "/workspace".
func TestWorkdirInsideWorkspace(t *testing.T) {
	h := newHarness(t)
	create := func(body string) (Run, answer) {
		t.Helper()
		a := h.do("POST", "/v1/runs", tokenA, body)
		var run Run
		if a.status == 201 {
			if err := json.Unmarshal(a.body, &run); err != nil {
				t.Fatal(err)
			}
		}
		return run, a
	}
	refused := func(body string, want ...string) {
		t.Helper()
		_, a := create(body)
		if a.status != 400 {
			t.Fatalf("%s: status %d, want 400: %s", body, a.status, a.body)
		}
		eb := a.errBody(t)
		for _, w := range want {
			if eb.Code != "invalid_argument" || !strings.Contains(eb.Message, w) {
				t.Errorf("%s: %+v lacks %q", body, eb, w)
			}
		}
	}
	// No sandbox yet.
	run, a := create(`{"conversation":"c1","workdir":"src/app"}`)
	if a.status != 201 || run.Workdir != "/workspace/src/app" {
		t.Fatalf("relative workdir: %d %s", a.status, a.body)
	}
	refused(`{"conversation":"c1","workdir":"/etc"}`, `workdir "/etc" is outside the workspace`, `has no sandbox yet`, `"/workspace"`)
	refused(`{"conversation":"c1","workdir":"/workspacex"}`, `"/workspacex" is outside`)
	refused(`{"conversation":"c1","workdir":"../etc"}`, `"/etc" is outside`)
	refused(`{"conversation":"c1","workdir":"/data/workspaces/a/c1"}`, `is outside the workspace`)

	// A sandbox whose workspace is a host folder.
	h.sb.workspace = "/data/workspaces/a/c1"
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, nil)
	for _, wd := range []string{"/workspace", "/workspace/sub", "/data/workspaces/a/c1", "/data/workspaces/a/c1/x", "sub"} {
		if _, a := create(`{"conversation":"c1","workdir":"` + wd + `"}`); a.status != 201 {
			t.Errorf("workdir %s: %d %s", wd, a.status, a.body)
		}
	}
	for _, wd := range []string{"/etc", "/data/workspaces/a", "/data/workspaces/a/c1x", "/data/workspaces/a/c2"} {
		refused(`{"conversation":"c1","workdir":"`+wd+`"}`, `workdir "`+wd+`" is outside the sandbox's workspace`, `/data/workspaces/a/c1`)
	}
	var runs []RunSummary
	h.must("GET", "/v1/runs", tokenA, "", 200, &runs)
	for _, r := range runs {
		if !strings.HasPrefix(r.Workdir, "/workspace") && !strings.HasPrefix(r.Workdir, "/data/workspaces/a/c1") {
			t.Errorf("a run outside the workspace was kept: %+v", r)
		}
	}
}

// A run whose conversation has no sandbox says which tools are absent and
// why, in POST /v1/runs and GET /v1/runs/{id}; calling one gets 404 with
// the reason; once the sandbox exists the same run sees them.
func TestRunSaysWhatIsUnavailable(t *testing.T) {
	h := newHarness(t)
	a := h.do("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`)
	if a.status != 201 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	noSandbox := `the conversation "c1" has no sandbox; create one with POST /v1/sandboxes {"conversation": "c1"}`
	var raw struct {
		ID          string          `json:"id"`
		Unavailable json.RawMessage `json:"unavailable"`
	}
	if err := json.Unmarshal(a.body, &raw); err != nil {
		t.Fatal(err)
	}
	var groups []struct {
		Tools  []string `json:"tools"`
		Reason string   `json:"reason"`
	}
	if err := json.Unmarshal(raw.Unavailable, &groups); err != nil {
		t.Fatalf("unavailable %s: %v", raw.Unavailable, err)
	}
	if len(groups) != 2 || strings.Join(groups[0].Tools, ",") != "poke" || !strings.HasPrefix(groups[0].Reason, noSandbox) ||
		strings.Join(groups[1].Tools, ",") != "shellish" || groups[1].Reason == "" {
		t.Fatalf("unavailable: %s", raw.Unavailable)
	}

	var got Run
	h.must("GET", "/v1/runs/"+raw.ID, tokenA, "", 200, &got)
	if got.ID != raw.ID || toolNames(got.Tools) != "peek" || len(got.Unavailable) != 2 || got.Unavailable[0].Reason != groups[0].Reason {
		t.Fatalf("GET run: %+v", got)
	}
	call := h.do("POST", "/v1/runs/"+raw.ID+"/tools/poke", tokenA, `{"path":"x"}`)
	if eb := call.errBody(t); call.status != 404 || eb.Code != "not_found" ||
		!strings.HasPrefix(eb.Message, `tool "poke" is not available to this run: `+noSandbox) {
		t.Fatalf("poke without a sandbox: %d %+v", call.status, eb)
	}

	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, nil)
	var after Run
	h.must("GET", "/v1/runs/"+raw.ID, tokenA, "", 200, &after)
	if toolNames(after.Tools) != "peek,poke,shellish" || after.Unavailable != nil {
		t.Fatalf("after the sandbox: %+v", after)
	}
	if a := h.do("GET", "/v1/runs/"+raw.ID, tokenA, ""); strings.Contains(string(a.body), "unavailable") {
		t.Errorf("a run that sees every tool still reports unavailable: %s", a.body)
	}
	// Another tenant cannot read the run.
	if a := h.do("GET", "/v1/runs/"+raw.ID, tokenB, ""); a.status != 404 {
		t.Errorf("tenant B GET run: %d", a.status)
	}
	// A plan run is told its surface is why write and exec tools are absent.
	var plan Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1","surface":"plan"}`, 201, &plan)
	if len(plan.Unavailable) != 2 || !strings.Contains(plan.Unavailable[0].Reason, `surface "plan"`) {
		t.Fatalf("plan run: %+v", plan.Unavailable)
	}
}
