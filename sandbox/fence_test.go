package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
)

// hookRecorder is an attach hook that remembers the clients it saw.
type hookRecorder struct {
	mu      sync.Mutex // guards clients
	clients []*agent.Client
	fail    error         // returned by every call when set
	gate    chan struct{} // when set, the first call waits for it to close
	entered chan struct{} // closed when the first call starts
}

func newHookRecorder() *hookRecorder { return &hookRecorder{entered: make(chan struct{})} }

func (h *hookRecorder) hook(ctx context.Context, info Info, c *agent.Client) error {
	h.mu.Lock()
	h.clients = append(h.clients, c)
	first := len(h.clients) == 1
	h.mu.Unlock()
	if first {
		close(h.entered)
		if h.gate != nil {
			<-h.gate
		}
	}
	if info.Conversation != "c1" {
		return errdefs.Internal("the hook got %q, not the dialed conversation", info.Conversation)
	}
	return h.fail
}

func (h *hookRecorder) seen() []*agent.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*agent.Client(nil), h.clients...)
}

func closedSoon(t *testing.T, what string, c *agent.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s is still open", what)
	}
}

// A failing attach hook fails the Agent call with its own error and class,
// leaves no pipe open, and runs again on the next call.
func TestAttachHookErrorFailsTheDial(t *testing.T) {
	f := newFake(t)
	obs := &countingObserver{}
	h := newHookRecorder()
	h.fail = errdefs.FailedPrecondition("claim superseded: this sandbox was claimed by replica-1 at epoch 2")
	m := startManager(t, f, WithObserver(obs), WithAttachHook(h.hook))
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, _, err := m.Agent(ctx, "acme", "c1")
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "claimed by replica-1") {
			t.Fatalf("Agent call %d with a failing hook = %v, want the hook's failed_precondition", i+1, err)
		}
	}
	seen := h.seen()
	if len(seen) != 2 {
		t.Fatalf("the hook ran %d times for 2 calls, want 2", len(seen))
	}
	for _, c := range seen {
		closedSoon(t, "the pipe the hook refused", c)
	}
	if opened, _, _ := obs.get(); opened != 0 {
		t.Errorf("the observer saw %d pipes opened, want 0", opened)
	}
}

// Detach closes the open pipe; the next Agent call dials a new one and the
// hook runs on it, and that is no reconnect.
func TestDetachRedials(t *testing.T) {
	f := newFake(t)
	h := newHookRecorder()
	m := startManager(t, f, WithAttachHook(h.hook))
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	c1, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	m.Detach(info.ID, "lease lost")
	closedSoon(t, "the detached pipe", c1)
	if _, err := m.Lookup(ctx, "acme", "c1"); err != nil {
		t.Fatalf("Lookup after Detach: %v", err)
	}
	c2, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if c2 == c1 {
		t.Fatal("Agent handed out the detached client")
	}
	if _, err := c2.Hello(ctx); err != nil {
		t.Fatalf("hello over the new pipe: %v", err)
	}
	if seen := h.seen(); len(seen) != 2 || seen[1] != c2 {
		t.Fatalf("the hook saw %d clients, want 2, the last the new one", len(seen))
	}
	if _, _, att := f.stats(); att != 2 {
		t.Errorf("attached %d times, want 2", att)
	}
	if n := m.Reconnects(); n != 0 {
		t.Errorf("Reconnects = %d after a Detach, want 0", n)
	}
	m.Detach("no-such-box", "test") // harmless
}

// A pipe whose dial completes after a Detach is never handed out: the
// waiting call gets a pipe opened (and hooked) after the Detach.
func TestDetachDuringDial(t *testing.T) {
	f := newFake(t)
	h := newHookRecorder()
	h.gate = make(chan struct{})
	m := startManager(t, f, WithAttachHook(h.hook))
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   *agent.Client
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, _, err := m.Agent(ctx, "acme", "c1")
		got <- result{c, err}
	}()
	select {
	case <-h.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the dial did not reach the hook")
	}
	m.Detach(info.ID, "lease lost")
	close(h.gate)
	r := <-got
	if r.err != nil {
		t.Fatalf("Agent across a Detach: %v", r.err)
	}
	seen := h.seen()
	if len(seen) != 2 || r.c != seen[1] {
		t.Fatalf("Agent returned a client the hook saw first (%d hooked); want the one opened after the Detach", len(seen))
	}
	closedSoon(t, "the pipe dialed before the Detach", seen[0])
	if _, err := r.c.Hello(ctx); err != nil {
		t.Fatal(err)
	}
}

// The reap gate can keep an idle sandbox; once it lets go, the sandbox is
// removed and release is called after the removal.
func TestReapGate(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex // guards now, allow, released, countAtRelease
	now := time.Now()
	allow := false
	released, countAtRelease := 0, -1
	gate := func(ctx context.Context, info Info) (func(), bool) {
		mu.Lock()
		defer mu.Unlock()
		if !allow {
			return nil, false
		}
		return func() {
			mu.Lock()
			released++
			countAtRelease = f.count()
			mu.Unlock()
		}, true
	}
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := startManager(t, f, WithIdleTTL(time.Hour), WithClock(clock), WithReapGate(gate))
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	m.reap(ctx)
	if _, err := m.Lookup(ctx, "acme", "c1"); err != nil || f.count() != 1 {
		t.Fatalf("the gate said no, yet the idle sandbox went: %v, %d left", err, f.count())
	}
	mu.Lock()
	allow = true
	mu.Unlock()
	m.reap(ctx)
	if f.count() != 0 {
		t.Fatal("the gate said yes, yet the idle sandbox stayed")
	}
	mu.Lock()
	defer mu.Unlock()
	if released != 1 || countAtRelease != 0 {
		t.Fatalf("release ran %d times, seeing %d sandboxes; want once, after the removal", released, countAtRelease)
	}
}

// Two Managers over one sandbox, as two replicas, fence each other through
// the agent: the newer claim closes the older replica's pipe, and the older
// replica's next dial is refused.
func TestReplicasFenceThroughTheAgent(t *testing.T) {
	f := newFake(t)
	claim := func(holder string, epoch int64) func(context.Context, Info, *agent.Client) error {
		return func(ctx context.Context, _ Info, c *agent.Client) error { return c.Claim(ctx, holder, epoch) }
	}
	a := startManager(t, f, WithAttachHook(claim("replica-0", 1)))
	ctx := testCtx(t)
	if _, err := a.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	b := startManager(t, f, WithAttachHook(claim("replica-1", 2)))
	ca, _, err := a.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	cb, _, err := b.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	closedSoon(t, "the older replica's pipe", ca)
	eventually(t, "replica-0 noticed its pipe closed", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		e := a.findLocked("acme", "c1")
		return e != nil && e.client == nil
	})
	_, _, err = a.Agent(ctx, "acme", "c1")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "epoch 2") {
		t.Fatalf("the older replica's next Agent call = %v, want failed_precondition naming epoch 2", err)
	}
	if _, err := cb.Hello(ctx); err != nil {
		t.Fatalf("the newer replica's pipe: %v", err)
	}
}
