package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

func TestValidateConversation(t *testing.T) {
	ok := []string{"c1", "C", "0", "conv:2024.01_a-b", strings.Repeat("a", 128)}
	bad := []string{"", "-c", ".c", ":c", "_c", "a b", "a/b", "a\x00", "é", strings.Repeat("a", 129), "a\n"}
	for _, id := range ok {
		if err := ValidateConversation(id); err != nil {
			t.Errorf("ValidateConversation(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range bad {
		err := ValidateConversation(id)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ValidateConversation(%q) = %v, want invalid_argument", id, err)
		}
	}
}

func TestCreateRejectsBadSpecs(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	for name, spec := range map[string]Spec{
		"no tenant":        {Conversation: "c1"},
		"bad conversation": {Tenant: "t", Conversation: "no spaces"},
		"bad network":      {Tenant: "t", Conversation: "c1", Network: "host"},
		"negative cpus":    {Tenant: "t", Conversation: "c1", Resources: Resources{CPUs: -1}},
		"relative host ws": {Tenant: "t", Conversation: "c1", HostWorkspace: "src"},
		"env with =":       {Tenant: "t", Conversation: "c1", Env: map[string]string{"A=B": "x"}},
	} {
		_, err := m.Create(ctx, spec)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: Create = %v, want invalid_argument", name, err)
		}
	}
	if c, _, _ := f.stats(); c != 0 {
		t.Errorf("bad specs reached the backend: %d creates", c)
	}
}

func TestConcurrentCreatesMakeOne(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
		}()
	}
	wg.Wait()
	var ok, conflict int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, errdefs.ErrConflict):
			conflict++
			if !strings.Contains(err.Error(), "c1") {
				t.Errorf("conflict does not name the conversation: %v", err)
			}
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || conflict != 7 || f.count() != 1 {
		t.Fatalf("got %d created, %d conflicts, %d sandboxes; want 1, 7, 1", ok, conflict, f.count())
	}
	// Another tenant's conversation of the same name is independent.
	if _, err := m.Create(ctx, Spec{Tenant: "other", Conversation: "c1"}); err != nil {
		t.Fatalf("other tenant's create: %v", err)
	}
}

func TestTenantIsolationAndRestart(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	a, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "evil", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's Get = %v, want not_found", err)
	}
	if err := m.Delete(ctx, "evil", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's Delete = %v, want not_found", err)
	}
	if _, err := m.Lookup(ctx, "evil", "c1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's Lookup = %v, want not_found", err)
	}
	if l, err := m.List(ctx, "evil", ""); err != nil || len(l) != 0 {
		t.Errorf("another tenant's List = %v, %v; want empty", l, err)
	}
	if l, _ := m.List(ctx, "acme", ""); len(l) != 2 {
		t.Errorf("List(acme) has %d sandboxes, want 2", len(l))
	}
	if l, _ := m.List(ctx, "acme", "c1"); len(l) != 1 || l[0].ID != a.ID {
		t.Errorf("List(acme, c1) = %+v, want only %s", l, a.ID)
	}

	// A new Manager over the same backend finds both again.
	m2 := startManager(t, f)
	got, err := m2.Lookup(ctx, "acme", "c1")
	if err != nil || got.ID != a.ID {
		t.Fatalf("restarted Lookup = %+v, %v; want %s", got, err, a.ID)
	}
	if n := m2.Counts()[StateRunning]; n != 2 {
		t.Errorf("restarted Counts()[running] = %d, want 2", n)
	}
	if _, err := m2.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("restarted Create of a mapped conversation = %v, want conflict", err)
	}
}

func TestLookupNeverCreates(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	for range 3 {
		if _, err := m.Lookup(ctx, "acme", "nobox"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("Lookup = %v, want not_found", err)
		}
		if _, _, err := m.Agent(ctx, "acme", "nobox"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("Agent = %v, want not_found", err)
		}
	}
	creates, lists, attaches := f.stats()
	if creates != 0 || attaches != 0 || f.count() != 0 {
		t.Fatalf("lookups created %d sandboxes and attached %d times", creates, attaches)
	}
	// Misses within the refresh window cost at most one extra listing.
	if lists > 2 {
		t.Errorf("6 misses listed the backend %d times, want at most 2", lists)
	}
}

func TestOnePipeSharedAndReopened(t *testing.T) {
	f := newFake(t)
	obs := &countingObserver{}
	m := startManager(t, f, WithObserver(obs))
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	clients := make([]*agent.Client, 10)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := m.Agent(ctx, "acme", "c1")
			if err != nil {
				t.Errorf("Agent: %v", err)
			}
			clients[i] = c
		}()
	}
	wg.Wait()
	if _, _, att := f.stats(); att != 1 {
		t.Fatalf("10 concurrent Agent calls attached %d times, want 1", att)
	}
	for _, c := range clients[1:] {
		if c != clients[0] {
			t.Fatal("callers got different clients for one sandbox")
		}
	}
	if _, err := clients[0].Hello(ctx); err != nil {
		t.Fatalf("hello over the shared pipe: %v", err)
	}

	// The pipe drops: the next call opens a new one and counts a reconnect.
	clients[0].Close()
	eventually(t, "the observer heard the pipe close", func() bool { _, closed, _ := obs.get(); return closed == 1 })
	c2, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatalf("Agent after the drop: %v", err)
	}
	if c2 == clients[0] {
		t.Fatal("Agent returned the dropped client")
	}
	if _, err := c2.Hello(ctx); err != nil {
		t.Fatalf("hello over the new pipe: %v", err)
	}
	if m.Reconnects() != 1 {
		t.Errorf("Reconnects = %d, want 1", m.Reconnects())
	}
	if opened, _, rec := obs.get(); opened != 2 || rec != 1 {
		t.Errorf("observer saw %d opens and %d reconnects, want 2 and 1", opened, rec)
	}
}

func TestProcessSurvivesPipeAndRestart(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Spawn(ctx, &proto.SpawnRequest{Name: "sleeper", Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	m2 := startManager(t, f)
	c2, _, err := m2.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	procs, err := c2.List(ctx, &proto.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].ID != p.ID || !procs[0].Running {
		t.Fatalf("after a restart the agent lists %+v, want %s running", procs, p.ID)
	}
}

func TestSandboxChangedBehindOurBack(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	a, _ := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	b, _ := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c2"})

	f.set(a.ID, func(i *Info) { i.State = StateStopped })
	_, _, err := m.Agent(ctx, "acme", "c1")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no longer running") || !strings.Contains(err.Error(), "c1") {
		t.Errorf("Agent on a stopped sandbox = %v, want failed_precondition naming c1", err)
	}

	if err := f.Remove(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = m.Agent(ctx, "acme", "c2")
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "removed outside sandboxd") {
		t.Errorf("Agent on a removed sandbox = %v, want not_found saying it was removed", err)
	}
	if _, err := m.Lookup(ctx, "acme", "c2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup after the removal = %v, want not_found", err)
	}
	// The conversation can have a new sandbox now.
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c2"}); err != nil {
		t.Errorf("Create after the removal: %v", err)
	}
}

func TestRefreshFindsOutsideChanges(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	m.opts.missRefresh = 0
	ctx := testCtx(t)
	id := f.addOutside("acme", "c9")
	if got, err := m.Lookup(ctx, "acme", "c9"); err != nil || got.ID != id {
		t.Fatalf("Lookup of a sandbox made elsewhere = %+v, %v", got, err)
	}
	f.Remove(ctx, id)
	if err := m.refresh(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := m.Counts()[StateRunning]; n != 0 {
		t.Errorf("after a refresh Counts()[running] = %d, want 0", n)
	}
}

func TestStaleListingDoesNotResurrect(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	a, _ := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})

	gate := make(chan struct{})
	f.mu.Lock()
	f.listGate = gate
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- m.refresh(ctx, time.Now()) }()
	eventually(t, "the listing started", func() bool { _, l, _ := f.stats(); return l >= 2 })

	if err := m.Delete(ctx, "acme", a.ID); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.listGate = nil
	f.mu.Unlock()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	_, resurrected := m.byID[a.ID]
	m.mu.Unlock()
	if resurrected {
		t.Fatal("a listing taken before the delete put the sandbox back")
	}
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
}

func TestEngineGoesAwayAndComesBack(t *testing.T) {
	f := newFake(t)
	f.setDown(true)
	m := startManager(t, f) // an unreachable engine does not fail Start
	m.opts.missRefresh = 0
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Create with the engine down = %v, want unavailable", err)
	}
	f.setDown(false)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatalf("Create once the engine is back: %v", err)
	}
	f.setDown(true)
	if _, err := m.List(ctx, "acme", ""); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("List with the engine down = %v, want unavailable", err)
	}
	if _, _, err := m.Agent(ctx, "acme", "c1"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Agent with the engine down = %v, want unavailable", err)
	}
	// The cache still serves lookups.
	if _, err := m.Lookup(ctx, "acme", "c1"); err != nil {
		t.Errorf("Lookup from the cache with the engine down: %v", err)
	}
	f.setDown(false)
	c, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatalf("Agent once the engine is back: %v", err)
	}
	if _, err := c.Hello(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestIdleReaping(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	m := startManager(t, f, WithIdleTTL(time.Hour), WithClock(clock))
	ctx := testCtx(t)
	m.Create(ctx, Spec{Tenant: "acme", Conversation: "idle"})
	m.Create(ctx, Spec{Tenant: "acme", Conversation: "busy"})

	advance(59 * time.Minute)
	if _, _, err := m.Agent(ctx, "acme", "busy"); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Minute)
	m.reap(ctx)
	if _, err := m.Lookup(ctx, "acme", "idle"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the idle sandbox survived reaping: %v", err)
	}
	if _, err := m.Lookup(ctx, "acme", "busy"); err != nil {
		t.Errorf("the used sandbox was reaped: %v", err)
	}
	if f.count() != 1 {
		t.Errorf("backend holds %d sandboxes, want 1", f.count())
	}
}

func TestReaperRunsOnItsOwn(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f, WithIdleTTL(200*time.Millisecond))
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle sandbox is reaped", func() bool { return f.count() == 0 })
}

func TestNoReapingByDefault(t *testing.T) {
	f := newFake(t)
	now := time.Now()
	m := startManager(t, f, WithClock(func() time.Time { return now }), WithRefreshInterval(10*time.Millisecond))
	ctx := testCtx(t)
	m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	now = now.Add(1000 * time.Hour)
	time.Sleep(100 * time.Millisecond)
	if f.count() != 1 {
		t.Fatal("a sandbox was reaped with reaping off")
	}
}

func TestDeleteAndClose(t *testing.T) {
	f := newFake(t)
	obs := &countingObserver{}
	m := NewManager(f, WithObserver(obs))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	a, _ := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	c, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "acme", a.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Delete left the pipe open")
	}
	if _, err := m.Get(ctx, "acme", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want not_found", err)
	}
	if err := m.Delete(ctx, "acme", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Delete = %v, want not_found", err)
	}
	m.Create(ctx, Spec{Tenant: "acme", Conversation: "c2"})
	c2, _, _ := m.Agent(ctx, "acme", "c2")
	m.Close()
	select {
	case <-c2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a pipe open")
	}
	if opened, closed, _ := obs.get(); opened != 2 || closed != 2 {
		t.Errorf("observer saw %d opens and %d closes, want 2 and 2", opened, closed)
	}
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c3"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Create after Close = %v, want unavailable", err)
	}
}
