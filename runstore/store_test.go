package runstore

import (
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestRunStoreExpiry(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	var mu sync.Mutex
	endedRuns := map[string]string{}
	s := New(WithTTL(time.Hour), WithClock(clk.now), WithEndHook(func(r tools.Run, reason string) {
		mu.Lock()
		endedRuns[r.ID] = reason
		mu.Unlock()
	}))
	busy, _ := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1"})
	idle, _ := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1"})
	child, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1", Parent: idle.ID})
	if err != nil {
		t.Fatal(err)
	}
	clk.add(40 * time.Minute)
	if _, err := s.Get(t.Context(), "a", busy.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "a", child.ID); err != nil {
		t.Fatal(err)
	}
	clk.add(30 * time.Minute) // idle: 70 min unused; busy and child: 30 min
	if _, err := s.Get(t.Context(), "a", idle.ID); !errorsIsNotFound(err) {
		t.Errorf("idle run after TTL: %v", err)
	}
	if _, err := s.Get(t.Context(), "a", busy.ID); err != nil {
		t.Errorf("busy run expired: %v", err)
	}
	// The child ended with its parent, though it was used recently.
	if _, err := s.Get(t.Context(), "a", child.ID); !errorsIsNotFound(err) {
		t.Errorf("child of expired run: %v", err)
	}
	mu.Lock()
	if endedRuns[idle.ID] != "expired" || endedRuns[child.ID] != "parent ended" || len(endedRuns) != 2 {
		t.Errorf("ended = %v", endedRuns)
	}
	mu.Unlock()
	if n := s.Active(); n != 1 {
		t.Errorf("active = %d, want 1", n)
	}
	clk.add(2 * time.Hour)
	if n := s.Active(); n != 0 {
		t.Errorf("active after everything expired = %d", n)
	}
	// Places freed by expiry count again.
	s2 := New(WithMaxPerTenant(1), WithTTL(time.Minute), WithClock(clk.now))
	s2.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c"})
	if _, err := s2.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c"}); errdefs.Code(err) != "resource_exhausted" {
		t.Errorf("over the cap: %v", err)
	}
	clk.add(time.Minute)
	if _, err := s2.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c"}); err != nil {
		t.Errorf("after expiry: %v", err)
	}
}

func errorsIsNotFound(err error) bool { return errdefs.Code(err) == "not_found" }

func TestRunStoreConcurrent(t *testing.T) {
	s := New(WithMaxPerTenant(50))
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c"})
			if err != nil {
				return
			}
			mu.Lock()
			ok++
			mu.Unlock()
			s.Get(t.Context(), "a", r.ID)
		}()
	}
	wg.Wait()
	if ok != 50 || s.Active() != 50 {
		t.Errorf("created %d, active %d; want 50", ok, s.Active())
	}
}
