package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/tools"
)

const otherToken = "token-of-tenant-b"

// auditReplica is one replica: the real API with its own audit record in
// its own dir, behind a Router, its member lease written by a real Owners.
type auditReplica struct {
	id     string
	url    string
	log    *audit.Log
	owners *Owners
}

func newAuditReplica(t *testing.T, ctx context.Context, cs *fake.Clientset, id string) *auditReplica {
	t.Helper()
	var toks []api.TenantToken
	for tenant, tok := range map[string]string{"a": humanToken, "b": otherToken} {
		tt, err := api.ParseTenantToken(tenant, api.HashToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tt)
	}
	l, err := audit.Open(audit.Options{Dir: t.TempDir(), Replica: id})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(func() { srv.Close(); l.Close() })
	rp := &auditReplica{id: id, url: "http://" + srv.Listener.Addr().String(), log: l}
	signer, err := NewSigner([]byte(peerSecret), id)
	if err != nil {
		t.Fatal(err)
	}
	rp.owners = NewOwners(cs, Options{Namespace: qNamespace, Deployment: qDeployment, Self: Peer{Identity: id, URL: rp.url},
		LeaseDuration: time.Minute, RenewInterval: time.Second})
	next := api.New(apitest.New(), tools.NewRegistry(), api.NewTokenAuth(toks...), api.WithAudit(l))
	srv.Config.Handler = NewRouter(next, RouterOptions{Owners: rp.owners, Forwarder: NewForwarder(signer, nil, nil), Signer: signer, MaxBody: 1 << 20})
	srv.Start()
	if err := rp.owners.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica "+id+" announced", func() bool { return len(rp.owners.Peers()) > 0 })
	return rp
}

// readAll pages through GET /v1/audit at rp with token, limit a page,
// leaving out the records of these reads themselves.
func readAll(t *testing.T, rp *auditReplica, token string, limit int) (recs []audit.Record, pages int, last api.AuditPage) {
	t.Helper()
	cursor := ""
	for pages = 1; pages < 100; pages++ {
		u := fmt.Sprintf("%s/v1/audit?limit=%d", rp.url, limit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		r := do(t, "GET", u, token, "", nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", u, r.status, r.body)
		}
		var page api.AuditPage
		if err := json.Unmarshal([]byte(r.body), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > limit {
			t.Fatalf("a page of %d records for limit %d", len(page.Records), limit)
		}
		for _, rec := range page.Records {
			if rec.Action != "GET /v1/audit" {
				recs = append(recs, rec)
			}
		}
		if page.Next == "" {
			return recs, pages, page
		}
		cursor = page.Next
	}
	t.Fatal("the pages never end")
	return
}

func TestAuditPagesMergeEveryReplica(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	r1, r3 := newAuditReplica(t, ctx, cs, "r1"), newAuditReplica(t, ctx, cs, "r3")
	eventually(t, "both replicas see each other", func() bool { return len(r1.owners.Peers()) == 2 && len(r3.owners.Peers()) == 2 })

	// Tenant a's actions alternate between the replicas in time; tenant
	// b has some on each too.
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i := range 20 {
		rp := []*auditReplica{r1, r3}[i%2]
		if err := rp.log.Append(audit.Record{Time: t0.Add(time.Duration(i) * time.Second), Kind: audit.KindTool, Tenant: "a",
			Action: fmt.Sprintf("step-%02d", i), Outcome: "ok"}, true); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			if err := rp.log.Append(audit.Record{Time: t0.Add(time.Duration(i) * time.Second), Kind: audit.KindTool, Tenant: "b",
				Action: "b-secret-step", Outcome: "ok"}, true); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, at := range []*auditReplica{r1, r3} {
		recs, pages, _ := readAll(t, at, humanToken, 3)
		var actions []string
		for _, rec := range recs {
			if rec.Tenant != "a" {
				t.Fatalf("tenant a read %+v", rec)
			}
			actions = append(actions, rec.Action)
		}
		var want []string
		for i := range 20 {
			want = append(want, fmt.Sprintf("step-%02d", i))
		}
		if !slices.Equal(actions, want) {
			t.Errorf("asked at %s, %d pages of 3 gave %v; want both replicas' records in time order, each once", at.id, pages, actions)
		}
	}
	recs, _, _ := readAll(t, r3, otherToken, 1000)
	if len(recs) != 5 {
		t.Errorf("tenant b read %d records at r3, want its 5 of both replicas: %+v", len(recs), recs)
	}
	for _, rec := range recs {
		if rec.Tenant != "b" {
			t.Errorf("tenant b read tenant %s's record %+v", rec.Tenant, rec)
		}
	}

	// A bad cursor and a bad limit get the API's own sentence.
	if r := do(t, "GET", r1.url+"/v1/audit?cursor=bogus", humanToken, "", nil); r.status != 400 {
		t.Errorf("a bad cursor: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", r1.url+"/v1/audit?limit=0", humanToken, "", nil); r.status != 400 {
		t.Errorf("a bad limit: %d %s", r.status, r.body)
	}

	// A replica that does not answer is named, and the cursor keeps its
	// place for a later page.
	addMember(t, cs, "r9", "http://127.0.0.1:1")
	eventually(t, "r1 sees r9", func() bool { return len(r1.owners.Peers()) == 3 })
	_, _, last := onePage(t, r1)
	if !slices.Equal(last.Unreached, []string{"r9"}) || last.Next == "" {
		t.Errorf("with r9 down the last page says unreached %v, next %q; want r9 and a cursor to come back with", last.Unreached, last.Next)
	}
}

// onePage reads the first page at rp, as large as the API gives.
func onePage(t *testing.T, rp *auditReplica) ([]audit.Record, int, api.AuditPage) {
	t.Helper()
	r := do(t, "GET", rp.url+"/v1/audit?limit=1000", humanToken, "", nil)
	if r.status != 200 {
		t.Fatalf("GET /v1/audit: %d %s", r.status, r.body)
	}
	var page api.AuditPage
	if err := json.Unmarshal([]byte(r.body), &page); err != nil {
		t.Fatal(err)
	}
	return page.Records, 1, page
}
