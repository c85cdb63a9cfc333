package sandbox

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// expiringFake is the fake engine that can pause, hibernate and change a
// sandbox's expiry label.
type expiringFake struct {
	sleepyFake
}

var _ ExpiryRecorder = expiringFake{}

func (f expiringFake) RecordExpiry(_ context.Context, id, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return errdefs.NotFound("no box %s", id)
	}
	b.Labels = maps.Clone(b.Labels)
	b.Labels[LabelExpiry] = value
	f.boxes[id] = b
	return nil
}

// At its expiry a sandbox is deleted, paused or hibernated as its expiry
// says; a pause or hibernation clears the expiry, so a sandbox woken later
// is not stopped again. A changed expiry is the one followed.
func TestExpirySteps(t *testing.T) {
	f := expiringFake{sleepyFake{newFake(t)}}
	m := startManager(t, f)
	ctx := testCtx(t)
	past := time.Now().Add(-time.Second)
	mk := func(conv string, e Expiry) Info {
		info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: conv, Expiry: e})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	later := mk("later", Expiry{At: time.Now().Add(time.Hour), Then: ExpireDelete})
	gone := mk("gone", Expiry{At: past, Then: ExpireDelete})
	paused := mk("paused", Expiry{At: past, Then: ExpirePause})
	hib := mk("hib", Expiry{At: past, Then: ExpireHibernate})
	get := func(id string) (Info, error) { return m.Get(ctx, "acme", id) }
	eventually(t, "the expired sandbox deleted", func() bool {
		_, err := get(gone.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
	for id, want := range map[string]string{paused.ID: StatePaused, hib.ID: StateHibernated} {
		eventually(t, "the expired sandbox "+want+" and its expiry cleared", func() bool {
			i, err := get(id)
			e, set, _ := ExpiryOf(i)
			return err == nil && i.State == want && set && e.IsZero()
		})
	}
	// Woken, it stays awake: its expiry was cleared.
	if _, err := m.Resume(ctx, "acme", paused.ID); err != nil {
		t.Fatal(err)
	}
	if i, _ := get(later.ID); i.State != StateRunning {
		t.Fatalf("the sandbox whose expiry is an hour away is %s", i.State)
	}
	// Moved into the past, the expiry is taken.
	if err := m.SetExpiry(ctx, "acme", later.ID, Expiry{At: past, Then: ExpireDelete}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the sandbox whose expiry moved to the past deleted", func() bool {
		_, err := get(later.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
	if err := m.SetExpiry(ctx, "other", paused.ID, Expiry{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's SetExpiry: %v", err)
	}
	if err := m.SetExpiry(ctx, "acme", paused.ID, Expiry{At: past, Then: "explode"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("an unknown step: %v", err)
	}
	if i, err := get(paused.ID); err != nil || i.State != StateRunning {
		t.Fatalf("the woken sandbox: %+v %v", i, err)
	}
}

// A listing made before an expiry changed does not bring the old one back.
func TestExpiryChangeOutlivesAnOlderListing(t *testing.T) {
	f := expiringFake{sleepyFake{newFake(t)}}
	m := startManager(t, f)
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1", Expiry: Expiry{At: time.Now().Add(time.Minute), Then: ExpireDelete}})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	f.mu.Lock()
	f.listGate = gate
	listsBefore := f.lists
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- m.refresh(ctx, time.Now()) }()
	eventually(t, "the listing taken", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lists > listsBefore
	})
	want := Expiry{At: time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), Then: ExpirePause}
	if err := m.SetExpiry(ctx, "acme", info.ID, want); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.listGate = nil
	f.mu.Unlock()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The map, which the reaper reads, not the engine (Get may ask it).
	m.mu.Lock()
	e := m.byID[info.ID].expiry
	m.mu.Unlock()
	if !e.At.Equal(want.At) || e.Then != want.Then {
		t.Fatalf("after the older listing the expiry is %+v; want %+v", e, want)
	}
}

// Spec.Labels are a front end's, under their prefix and within the size
// every engine takes; a fork's copies keep them.
func TestFrontEndLabels(t *testing.T) {
	m := startManager(t, newFake(t))
	ctx := testCtx(t)
	for _, bad := range []map[string]string{{"io.sandboxd.tenant": "x"}, {LabelExtPrefix: "x"}, {LabelExtPrefix + "big": string(make([]byte, MaxLabelBytes))}} {
		if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "bad", Labels: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("labels %.40v: %v", bad, err)
		}
	}
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1", Labels: map[string]string{LabelExtPrefix + "e2b": `{"t":"base"}`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ExtLabels(info); len(got) != 1 || got[LabelExtPrefix+"e2b"] != `{"t":"base"}` {
		t.Fatalf("the created sandbox's own labels: %v", got)
	}
}
