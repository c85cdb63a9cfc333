package events_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/events"
)

type keep struct {
	mu  sync.Mutex
	got []events.Event
}

func (k *keep) Emit(ev events.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, ev)
}

func TestBusHandsEveryEventToEverySink(t *testing.T) {
	var b events.Bus
	a, c := &keep{}, &keep{}
	b.Emit(events.Event{Type: events.SandboxCreated}) // no sink yet: dropped
	b.Add(a)
	b.Add(c)
	b.Emit(events.Event{Type: events.SandboxPaused, Tenant: "acme"})
	b.Emit(events.Event{Type: events.SandboxResumed, Tenant: "acme", ID: "evt_given"})
	for _, k := range []*keep{a, c} {
		if len(k.got) != 2 || k.got[0].Type != events.SandboxPaused || k.got[1].Type != events.SandboxResumed {
			t.Fatalf("a sink heard %+v; want paused then resumed", k.got)
		}
		if !strings.HasPrefix(k.got[0].ID, "evt_") || len(k.got[0].ID) != 36 || k.got[0].Time.IsZero() {
			t.Errorf("an emitted event got no id or time: %+v", k.got[0])
		}
		if k.got[1].ID != "evt_given" {
			t.Errorf("an id given was replaced: %q", k.got[1].ID)
		}
	}
	if a.got[0].ID != c.got[0].ID {
		t.Errorf("two sinks heard one event under two ids: %q, %q", a.got[0].ID, c.got[0].ID)
	}
	var nilBus *events.Bus
	nilBus.Emit(events.Event{Type: events.RunCreated}) // must not panic
}
