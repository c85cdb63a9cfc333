package audit

import (
	"testing"

	"github.com/sandboxd/sandboxd/events"
)

func TestEventsAreRecordsOfKindEvent(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	var bus events.Bus
	bus.Add(NewEventRecorder(l))
	for _, ev := range []events.Event{
		{Type: events.SandboxPaused, Tenant: "acme", Sandbox: "sb1", Conversation: "c1"},
		{Type: events.QuestionAnswered, Tenant: "acme", Run: "r1", Question: "q1", Reason: "skipped"},
		{Type: events.PreviewRevoked, Tenant: "acme", Sandbox: "sb1", Preview: "pv1", Target: "port 3000"},
		{Type: events.EgressDenied, Tenant: "other", Sandbox: "sb2", Target: "connect example.com:443", Reason: "no rule allows example.com"},
	} {
		bus.Emit(ev)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	page, err := Read(dir, Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ action, outcome, detail, tenant string }{
		{events.SandboxPaused, "ok", "", "acme"},
		{events.QuestionAnswered, "skipped", "question q1", "acme"},
		{events.PreviewRevoked, "ok", "preview pv1: port 3000", "acme"},
		{events.EgressDenied, "denied", "connect example.com:443: no rule allows example.com", "other"},
	}
	if len(page.Records) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(page.Records), len(want), page.Records)
	}
	for i, w := range want {
		r := page.Records[i]
		if r.Kind != KindEvent || r.Action != w.action || r.Outcome != w.outcome || r.Detail != w.detail || r.Tenant != w.tenant || r.Time.IsZero() {
			t.Errorf("record %d = %+v; want kind event, action %s, outcome %s, detail %q, tenant %s", i, r, w.action, w.outcome, w.detail, w.tenant)
		}
	}
	if rep, err := Verify(dir); err != nil || rep.Break != nil || rep.Records != len(want) {
		t.Errorf("the chain with event records does not verify: %+v %v", rep, err)
	}
}
