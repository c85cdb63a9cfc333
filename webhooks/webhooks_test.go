package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSignVerify(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"sandbox.created"}`)
	sig := Sign("s3cret", 1700000000, body)
	if !Verify("s3cret", "1700000000", sig, body) {
		t.Fatalf("the right secret does not verify %s", sig)
	}
	if Verify("wrong", "1700000000", sig, body) {
		t.Error("a wrong secret verifies")
	}
	if Verify("s3cret", "1700000001", sig, body) {
		t.Error("another timestamp verifies")
	}
	if Verify("s3cret", "1700000000", sig, append(body, ' ')) {
		t.Error("a changed body verifies")
	}
}

func TestMetricsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics())
	n, err := testutil.GatherAndCount(reg, "sandboxd_webhook_deliveries_total")
	if err != nil || n != 4 {
		t.Fatalf("series of deliveries = %d (%v), want 4 at zero", n, err)
	}
}

func TestNextWaitBoundedByMaxAge(t *testing.T) {
	maxAge := 10 * time.Second
	for attempt := 0; attempt < 40; attempt++ {
		for _, age := range []time.Duration{0, time.Second, 9 * time.Second, 9999 * time.Millisecond} {
			wait, ok := NextWait(attempt, age, maxAge, time.Second, time.Minute)
			if !ok {
				t.Fatalf("attempt %d at age %s given up before the max age", attempt, age)
			}
			if wait <= 0 || age+wait > maxAge {
				t.Fatalf("attempt %d at age %s waits %s, past the max age %s", attempt, age, wait, maxAge)
			}
		}
	}
	if _, ok := NextWait(0, maxAge, maxAge, time.Second, time.Minute); ok {
		t.Error("an event of the max age is retried")
	}
	if w, _ := NextWait(3, 0, time.Hour, time.Second, time.Minute); w != 8*time.Second {
		t.Errorf("the fourth wait is %s, want 8s (doubling)", w)
	}
	if w, _ := NextWait(30, 0, time.Hour, time.Second, time.Minute); w != time.Minute {
		t.Errorf("a late wait is %s, want the max backoff 1m", w)
	}
}

// receiver records verified events; it fails the first failFirst requests
// of each event whose type is in failTypes.
type receiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	got    []Event
	tries  map[string]int
	fail   func(ev Event, try int) bool
	notify chan struct{}
}

func newReceiver(t *testing.T, secret string, fail func(Event, int) bool) (*receiver, *httptest.Server) {
	r := &receiver{t: t, secret: secret, tries: map[string]int{}, fail: fail, notify: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if !Verify(r.secret, req.Header.Get(HeaderTimestamp), req.Header.Get(HeaderSignature), body) {
		r.t.Errorf("a delivery's signature does not verify: %s", req.Header.Get(HeaderSignature))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != req.Header.Get(HeaderEventID) {
		r.t.Errorf("body %s does not match its event id header (%v)", body, err)
	}
	r.mu.Lock()
	r.tries[ev.ID]++
	failing := r.fail != nil && r.fail(ev, r.tries[ev.ID])
	if !failing {
		r.got = append(r.got, ev)
	}
	r.mu.Unlock()
	if failing {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *receiver) waitFor(n int) []Event {
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		got := append([]Event(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-deadline:
			r.t.Fatalf("the receiver has %d events after 20 s, want %d", len(got), n)
		}
	}
}

func TestOrderPerSandboxUnderRetries(t *testing.T) {
	// Every event's first two tries fail: each later event must still come
	// after the one before it.
	rec, srv := newReceiver(t, "k", func(_ Event, try int) bool { return try <= 2 })
	m := NewMetrics()
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k"}},
		Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Metrics: m})
	types := []string{SandboxCreated, SandboxPaused, SandboxResumed, SandboxHibernated, SandboxResumed, SandboxDeleted}
	for _, typ := range types {
		d.Emit(Event{Type: typ, Tenant: "acme", Sandbox: "sb1"})
		d.Emit(Event{Type: typ, Tenant: "other", Sandbox: "sb2"}) // no endpoint: not sent
	}
	got := rec.waitFor(len(types))
	defer d.Close(context.Background())
	// The receiver records an event before its answer reaches the worker.
	waitCount(t, m, OutcomeDelivered, float64(len(types)))
	for i, ev := range got {
		if ev.Type != types[i] || ev.Sandbox != "sb1" || ev.Tenant != "acme" {
			t.Errorf("event %d is %s of %s/%s, want %s of acme/sb1", i, ev.Type, ev.Tenant, ev.Sandbox, types[i])
		}
	}
	if v := testutil.ToFloat64(m.deliveries.WithLabelValues(OutcomeRetried)); v != float64(2*len(types)) {
		t.Errorf("retried = %v, want %d", v, 2*len(types))
	}
}

func TestEventsFilter(t *testing.T) {
	rec, srv := newReceiver(t, "k", nil)
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k", Events: []string{SandboxDeleted}}}, Options{})
	defer d.Close(context.Background())
	d.Emit(Event{Type: SandboxCreated, Tenant: "acme", Sandbox: "sb1"})
	d.Emit(Event{Type: SandboxDeleted, Tenant: "acme", Sandbox: "sb1"})
	got := rec.waitFor(1)
	if got[0].Type != SandboxDeleted {
		t.Errorf("the endpoint got %s, want only %s", got[0].Type, SandboxDeleted)
	}
}

func TestGivenUpAtMaxAge(t *testing.T) {
	_, srv := newReceiver(t, "k", func(Event, int) bool { return true })
	m := NewMetrics()
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k", MaxAge: 50 * time.Millisecond}},
		Options{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Metrics: m})
	defer d.Close(context.Background())
	d.Emit(Event{Type: SandboxCreated, Tenant: "acme", Sandbox: "sb1"})
	waitCount(t, m, OutcomeFailed, 1)
	if v := testutil.ToFloat64(m.deliveries.WithLabelValues(OutcomeDelivered)); v != 0 {
		t.Errorf("delivered = %v, want 0", v)
	}
}

func TestFullQueueDoesNotBlock(t *testing.T) {
	// The receiver holds every request until the test ends, so the worker
	// is stuck on the first event and the queue fills.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	m := NewMetrics()
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k"}}, Options{QueueCap: 3, Metrics: m})
	const n = 100
	done := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			d.Emit(Event{Type: SandboxCreated, Tenant: "acme", Sandbox: "sb"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Emit blocked on a full queue")
	}
	// At most the one in flight and the three queued are kept.
	if v := testutil.ToFloat64(m.deliveries.WithLabelValues(OutcomeDropped)); v < n-4 {
		t.Errorf("dropped = %v, want at least %d", v, n-4)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if v := testutil.ToFloat64(m.deliveries.WithLabelValues(OutcomeDropped)); v != n {
		t.Errorf("dropped after Close = %v, want %d (every event not delivered)", v, n)
	}
}

// waitCount waits up to 20 s for the outcome's counter to reach want.
func waitCount(t *testing.T, m *Metrics, outcome string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(m.deliveries.WithLabelValues(outcome)) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 20 s, want %v", outcome, testutil.ToFloat64(m.deliveries.WithLabelValues(outcome)), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSpoolKeepsEventsAcrossClose(t *testing.T) {
	spool := t.TempDir()
	var up sync.Mutex
	down := true
	rec, srv := newReceiver(t, "k", func(Event, int) bool { up.Lock(); defer up.Unlock(); return down })
	m := NewMetrics()
	ep := Endpoint{Tenant: "acme", URL: srv.URL, Secret: "k"}
	d := New([]Endpoint{ep}, Options{Backoff: time.Hour, SpoolDir: spool, Metrics: m})
	types := []string{SandboxCreated, SandboxPaused, SandboxDeleted}
	for _, typ := range types {
		d.Emit(Event{Type: typ, Tenant: "acme", Sandbox: "sb1"})
	}
	// The first attempt fails and waits an hour; the others stay queued.
	waitCount(t, m, OutcomeRetried, 1)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	up.Lock()
	down = false
	up.Unlock()
	d2 := New([]Endpoint{ep}, Options{SpoolDir: spool, Metrics: m})
	defer d2.Close(context.Background())
	got := rec.waitFor(len(types))
	for i, ev := range got {
		if ev.Type != types[i] {
			t.Errorf("event %d after the restart is %s, want %s", i, ev.Type, types[i])
		}
	}
	if v := testutil.ToFloat64(m.deliveries.WithLabelValues(OutcomeDropped)); v != 0 {
		t.Errorf("dropped = %v, want 0 (the spool kept them)", v)
	}
}
