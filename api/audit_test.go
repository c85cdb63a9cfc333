package api

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/mcp"
	"github.com/sandboxd/sandboxd/audit"
)

// newAuditHarness is newHarness with the audit record on: the registry's
// calls and the server's requests go to one Log.
func newAuditHarness(t *testing.T, opts ...Option) (*harness, *audit.Log) {
	t.Helper()
	l, err := audit.Open(audit.Options{Dir: t.TempDir(), Replica: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	reg := newRegistry()
	reg.AddObserver(audit.NewRecorder(l))
	a, _ := ParseTenantToken("a", HashToken(tokenA))
	b, _ := ParseTenantToken("b", HashToken(tokenB))
	h := &harness{t: t, sb: newLeaky()}
	h.srv = New(h.sb, reg, NewTokenAuth(a, b), append([]Option{WithAudit(l)}, opts...)...)
	h.http = httptest.NewServer(h.srv)
	t.Cleanup(h.http.Close)
	return h, l
}

// auditOf reads every record token may see, a page of limit at a time,
// leaving out the reads of the record itself.
func auditOf(h *harness, token string, limit int, query string) []audit.Record {
	h.t.Helper()
	var out []audit.Record
	cursor := ""
	for page := 0; ; page++ {
		if page > 100 {
			h.t.Fatal("the cursor never ends")
		}
		q := fmt.Sprintf("/v1/audit?limit=%d%s", limit, query)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var p AuditPage
		h.must("GET", q, token, "", 200, &p)
		if len(p.Records) > limit {
			h.t.Fatalf("a page of limit %d has %d records", limit, len(p.Records))
		}
		for _, r := range p.Records {
			if r.Action != "GET /v1/audit" {
				out = append(out, r)
			}
		}
		if p.Next == "" {
			return out
		}
		cursor = p.Next
	}
}

func TestAuditRecordsEachCallOnceAndATenantSeesOnlyItsOwn(t *testing.T) {
	h, _ := newAuditHarness(t)
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, &sb)
	var runA, runB Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &runA)
	h.must("POST", "/v1/runs", tokenB, `{"conversation":"c2"}`, 201, &runB)
	for i := range 3 {
		h.must("POST", "/v1/runs/"+runA.ID+"/tools/peek", tokenA, fmt.Sprintf(`{"path":"f%d"}`, i), 200, nil)
	}
	h.must("POST", "/v1/runs/"+runA.ID+"/tools/poke", tokenA, `{"path":"x"}`, 200, nil)
	if a := h.do("POST", "/v1/runs/"+runA.ID+"/tools/nosuch", tokenA, `{}`); a.status != 404 {
		t.Fatalf("an unknown tool: %d", a.status)
	}
	h.must("POST", "/v1/runs/"+runB.ID+"/tools/peek", tokenB, `{}`, 200, nil)
	if a := h.do("GET", "/v1/runs", "not-a-token", ""); a.status != 401 {
		t.Fatalf("a bad token: %d", a.status)
	}

	// a's actions: the sandbox, the run, 3 peeks, 1 poke, the unknown
	// tool. An API record is appended as its request ends, which may be
	// after its answer reached the client: wait for it, to a deadline.
	var got []audit.Record
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = auditOf(h, tokenA, 1000, "")
		if len(got) >= 7 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	count := map[string]int{}
	for _, r := range got {
		if r.Tenant != "a" {
			t.Fatalf("tenant a was shown another's record: %+v", r)
		}
		count[r.Kind+" "+r.Action]++
	}
	want := map[string]int{"api POST /v1/sandboxes": 1, "api POST /v1/runs": 1, "tool peek": 3, "tool poke": 1,
		"api " + callToolRoute: 1}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("records of tenant a: %v, want exactly %v", count, want)
	}
	for _, r := range got {
		switch r.Action {
		case "poke":
			if r.Level != "write" || r.Sandbox != sb.ID || r.Run != runA.ID || r.Conversation != "c1" || r.Route != callToolRoute ||
				r.TokenID != audit.TokenID(tokenA) || r.ArgsSHA256 != audit.Digest([]byte(`{"path":"x"}`)) || r.Outcome != "ok" {
				t.Fatalf("the poke record: %+v", r)
			}
		case callToolRoute:
			if r.Outcome != "not_found" || r.Status != 404 || r.Run != runA.ID {
				t.Fatalf("the refused call's record: %+v", r)
			}
		}
	}
	b, _ := json.Marshal(got)
	for _, tok := range []string{tokenA, tokenB, "not-a-token"} {
		if strings.Contains(string(b), tok) {
			t.Fatalf("a record holds the token %q", tok)
		}
	}

	// Pages of 2 hold the same records in the same order.
	paged := auditOf(h, tokenA, 2, "")
	if len(paged) < len(got) {
		t.Fatalf("paging by 2 found %d records, one read %d", len(paged), len(got))
	}
	for i := range got {
		if paged[i].Seq != got[i].Seq {
			t.Fatalf("page order differs at %d: %d vs %d", i, paged[i].Seq, got[i].Seq)
		}
	}
	// Filters.
	for _, r := range auditOf(h, tokenA, 1000, "&run="+runA.ID) {
		if r.Run != runA.ID {
			t.Fatalf("run filter: %+v", r)
		}
	}
	if n := len(auditOf(h, tokenA, 1000, "&until=2000-01-01T00:00:00Z")); n != 0 {
		t.Fatalf("until 2000 found %d records", n)
	}
	// Tenant b sees its own, never a's.
	for _, r := range auditOf(h, tokenB, 1000, "") {
		if r.Tenant != "b" {
			t.Fatalf("tenant b was shown %+v", r)
		}
	}
	if a := h.do("GET", "/v1/audit?limit=1001", tokenA, ""); a.status != 400 || a.errBody(t).Code != "invalid_argument" {
		t.Fatalf("limit 1001: %d %s", a.status, a.body)
	}
	if a := h.do("GET", "/v1/audit?cursor=xyz", tokenA, ""); a.status != 400 {
		t.Fatalf("a made-up cursor: %d %s", a.status, a.body)
	}
}

func TestAuditAdminSeesEveryTenant(t *testing.T) {
	h, _ := newAuditHarness(t, WithAuditAll("a"))
	h.must("GET", "/v1/runs", tokenB, "", 200, nil)
	h.do("GET", "/v1/runs", "", "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		tenants := map[string]bool{}
		for _, r := range auditOf(h, tokenA, 1000, "") {
			tenants[r.Tenant] = true
		}
		if tenants["b"] && tenants[""] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin saw tenants %v, want b's and the unauthenticated request's", tenants)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The record of a sandbox's create names the sandbox it made, so asking
// for the sandbox's records (?sandbox=) finds who made it, with which
// token; a create refused names none.
func TestAuditSandboxCreateNamesTheSandbox(t *testing.T) {
	h, _ := newAuditHarness(t)
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, &sb)
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"no spaces allowed"}`, 400, nil)
	deadline := time.Now().Add(10 * time.Second)
	var got []audit.Record
	for {
		got = auditOf(h, tokenA, 1000, "")
		if len(got) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 2 || got[0].Sandbox != sb.ID || got[0].Conversation != "c1" || got[0].Status != 201 ||
		got[1].Sandbox != "" || got[1].Status != 400 {
		t.Fatalf("the creates' records: %+v; want the first to name sandbox %s of c1, the refused one none", got, sb.ID)
	}
	if bySandbox := auditOf(h, tokenA, 1000, "&sandbox="+sb.ID); len(bySandbox) != 1 || bySandbox[0].TokenID != audit.TokenID(tokenA) {
		t.Fatalf("?sandbox=%s: %+v, want the create's record with its token id", sb.ID, bySandbox)
	}
}

func TestAuditOffAnswers503(t *testing.T) {
	h := newHarness(t)
	if a := h.do("GET", "/v1/audit", tokenA, ""); a.status != 503 {
		t.Fatalf("without an audit record: %d %s", a.status, a.body)
	}
}

// An MCP request is one API record, and each tools/call in it one tool
// record that names the MCP route.
func TestAuditMCPCallIsAToolRecordBesideItsRequest(t *testing.T) {
	h, _ := newAuditHarness(t)
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	a := h.mcpDo(run.ID, tokenA, "", mcpInit)
	sid := a.header.Get(mcp.HeaderSession)
	if a.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	h.mcpDo(run.ID, tokenA, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"peek","arguments":{"path":"x"}}}`)
	const mcpRoute = "POST /v1/runs/{id}/mcp"
	deadline := time.Now().Add(10 * time.Second)
	for {
		var apiRecs, toolRecs int
		for _, r := range auditOf(h, tokenA, 1000, "") {
			switch {
			case r.Kind == audit.KindAPI && r.Action == mcpRoute:
				apiRecs++
			case r.Kind == audit.KindTool && r.Action == "peek":
				toolRecs++
				if r.Route != mcpRoute || r.Run != run.ID || r.TokenID != audit.TokenID(tokenA) {
					t.Fatalf("the MCP call's record: %+v", r)
				}
			}
		}
		if apiRecs == 2 && toolRecs == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d API records of the MCP route (want 2: initialize and the call) and %d peek records (want 1)", apiRecs, toolRecs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
