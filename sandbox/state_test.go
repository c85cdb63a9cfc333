package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// A paused sandbox is reported as paused, at once, with the way out; its pipe
// is kept, and the next call after the unpause works on it.
func TestPausedSandboxFailsFastAndRecovers(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f, WithStateCheck(1)) // re-read the state before every reuse
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "p"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "p")
	if err != nil {
		t.Fatal(err)
	}
	f.set(info.ID, func(i *Info) { i.State = StatePaused })
	_, _, err = m.Agent(ctx, "acme", "p")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is paused") || !strings.Contains(err.Error(), "unpause") ||
		strings.Contains(err.Error(), "delete it") {
		t.Fatalf("Agent on a paused sandbox = %v, want failed_precondition saying it is paused and to unpause it", err)
	}
	if got, err := m.Get(ctx, "acme", info.ID); err != nil || got.State != StatePaused {
		t.Errorf("Get of the paused sandbox = %+v, %v; want state paused", got, err)
	}
	if n := m.Counts()[StatePaused]; n != 1 {
		t.Errorf("Counts = %v, want 1 paused", m.Counts())
	}
	f.set(info.ID, func(i *Info) { i.State = StateRunning })
	c2, _, err := m.Agent(ctx, "acme", "p")
	if err != nil {
		t.Fatalf("Agent after the unpause = %v", err)
	}
	if c2 != c {
		t.Error("the unpause cost the pipe; it should be kept across a pause")
	}
	if _, err := c2.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."}); err != nil {
		t.Errorf("a call after the unpause = %v", err)
	}
}

// Without an open pipe, a paused sandbox is reported before any attach.
func TestPausedSandboxIsNotDialled(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	info, _ := m.Create(ctx, Spec{Tenant: "acme", Conversation: "p"})
	f.set(info.ID, func(i *Info) { i.State = StatePaused })
	if _, _, err := m.Agent(ctx, "acme", "p"); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is paused") {
		t.Fatalf("Agent = %v, want failed_precondition: paused", err)
	}
	if _, _, attaches := f.stats(); attaches != 0 {
		t.Errorf("%d attaches to a paused sandbox, want none", attaches)
	}
	f.set(info.ID, func(i *Info) { i.State = StateRunning })
	if _, _, err := m.Agent(ctx, "acme", "p"); err != nil {
		t.Fatalf("Agent after the unpause = %v", err)
	}
}

// The engine said "running", then the sandbox stopped while the pipe was
// being opened (the hello found the exec gone): the error tells the state
// read after the failure, not a dropped session.
func TestDialFailureReadsTheState(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	info, _ := m.Create(ctx, Spec{Tenant: "acme", Conversation: "s"})
	f.attachHook = func(b *Info) (bool, error) { b.State = StateStopped; return true, nil }
	_, _, err := m.Agent(ctx, "acme", "s")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no longer running") {
		t.Fatalf("Agent when the sandbox stopped during the dial = %v, want failed_precondition: no longer running", err)
	}
	// Paused during the dial: reported as paused.
	f.set(info.ID, func(i *Info) { i.State = StateRunning })
	f.attachHook = func(b *Info) (bool, error) {
		b.State = StatePaused
		return false, errdefs.FailedPrecondition("exec refused")
	}
	if _, _, err := m.Agent(ctx, "acme", "s"); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is paused") {
		t.Fatalf("Agent when the sandbox paused during the dial = %v, want failed_precondition: paused", err)
	}
	// Still running by the engine's word: the dial's own error, retryable.
	f.set(info.ID, func(i *Info) { i.State = StateRunning })
	f.attachHook = func(*Info) (bool, error) { return true, nil }
	if _, _, err := m.Agent(ctx, "acme", "s"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Agent when the pipe dies but the sandbox runs = %v, want unavailable", err)
	}
	// Removed during the dial: not found.
	f.attachHook = func(*Info) (bool, error) { delete(f.boxes, info.ID); return true, nil }
	if _, _, err := m.Agent(ctx, "acme", "s"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("Agent when the sandbox vanished during the dial = %v, want not_found", err)
	}
}

// The engine still says "running" right after the dial failed and reports
// the stop a read later (a kubelet's lag): the error still tells the stop.
func TestDialFailureWaitsForTheEngineToCatchUp(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	m.Create(ctx, Spec{Tenant: "acme", Conversation: "s"})
	failed, reads := false, 0
	f.attachHook = func(*Info) (bool, error) { failed = true; return true, nil }
	f.inspectHook = func(b *Info) {
		if failed {
			if reads++; reads == 2 {
				b.State = StateStopped
			}
		}
	}
	_, _, err := m.Agent(ctx, "acme", "s")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no longer running") {
		t.Fatalf("Agent = %v, want failed_precondition: no longer running", err)
	}
}
