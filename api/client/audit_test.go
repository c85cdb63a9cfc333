package client

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Audit pages a tenant's records with the cursor, narrowed by run and
// time, and a bad limit is the API's invalid argument.
func TestAuditPages(t *testing.T) {
	ctx := context.Background()
	l, err := audit.Open(audit.Options{Dir: t.TempDir(), Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i := range 5 {
		run := "run_a"
		if i%2 == 1 {
			run = "run_b"
		}
		if err := l.Append(audit.Record{Time: t0.Add(time.Duration(i) * time.Minute), Kind: audit.KindTool, Tenant: "a", Run: run, Action: "read", Outcome: "ok"}, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append(audit.Record{Time: t0, Kind: audit.KindTool, Tenant: "b", Run: "run_x", Action: "read", Outcome: "ok"}, true); err != nil {
		t.Fatal(err)
	}
	a, _ := api.ParseTenantToken("a", api.HashToken("ta"))
	b, _ := api.ParseTenantToken("b", api.HashToken("tb"))
	srv := httptest.NewServer(api.New(apitest.New(), tools.NewRegistry(), api.NewTokenAuth(a, b), api.WithAudit(l)))
	defer srv.Close()
	c, err := New(srv.URL, "ta")
	if err != nil {
		t.Fatal(err)
	}

	var runs []string
	q := AuditQuery{Limit: 2, Since: t0, Until: t0.Add(5 * time.Minute)} // leaves out the reads of the record themselves
	for pages := 0; ; pages++ {
		p, err := c.Audit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) > 2 || pages > 5 {
			t.Fatalf("page %d: %d records for limit 2", pages, len(p.Records))
		}
		for _, r := range p.Records {
			if r.Tenant != "a" {
				t.Fatalf("tenant a read %+v", r)
			}
			runs = append(runs, r.Run)
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	if want := "[run_a run_b run_a run_b run_a]"; fmt.Sprint(runs) != want {
		t.Errorf("paged runs %v, want %s", runs, want)
	}
	p, err := c.Audit(ctx, AuditQuery{Run: "run_b"})
	if err != nil || len(p.Records) != 2 {
		t.Errorf("run_b's records: %d, %v; want 2", len(p.Records), err)
	}
	if _, err := c.Audit(ctx, AuditQuery{Limit: 5000}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a limit of 5000: %v; want invalid argument", err)
	}
}

// Reading a run's whole audit record, a page at a time.
func ExampleClient_Audit() {
	c, err := New("http://127.0.0.1:8080", "TOKEN")
	if err != nil {
		panic(err)
	}
	q := AuditQuery{Run: "run_123", Limit: 1000}
	for {
		page, err := c.Audit(context.Background(), q)
		if err != nil {
			panic(err)
		}
		for _, r := range page.Records {
			fmt.Println(r.Time, r.Kind, r.Action, r.Outcome)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
}
