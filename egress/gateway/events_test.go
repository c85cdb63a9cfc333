package gateway

import (
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/events"
)

type eventLog struct{ got []events.Event }

func (e *eventLog) Emit(ev events.Event) { e.got = append(e.got, ev) }

func TestEveryDecisionIsAnEvent(t *testing.T) {
	evs := &eventLog{}
	g, err := New(parseCfg(t, "egress: {allow: [pypi.org]}"), Options{DataDir: t.TempDir(), Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	g.record(egress.Decision{Time: at, Tenant: "acme", Sandbox: "sb1", Conversation: "c1", Kind: "connect", Host: "pypi.org", Port: 443, Allowed: true, Reason: "allowed by pypi.org"})
	g.record(egress.Decision{Time: at, Tenant: "acme", Sandbox: "sb1", Kind: "http", Host: "::1", Port: 80, Reason: "no rule allows ::1"})
	want := []events.Event{
		{Type: events.EgressAllowed, Time: at, Tenant: "acme", Sandbox: "sb1", Conversation: "c1", Target: "connect pypi.org:443", Reason: "allowed by pypi.org"},
		{Type: events.EgressDenied, Time: at, Tenant: "acme", Sandbox: "sb1", Target: "http [::1]:80", Reason: "no rule allows ::1"},
	}
	if len(evs.got) != len(want) {
		t.Fatalf("events %+v; want %+v", evs.got, want)
	}
	for i := range want {
		if evs.got[i] != want[i] {
			t.Errorf("event %d = %+v; want %+v", i, evs.got[i], want[i])
		}
	}
}
