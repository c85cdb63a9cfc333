package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sandboxd/sandboxd/events"
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
	got    []events.Event
	tries  map[string]int
	fail   func(ev events.Event, try int) bool
	notify chan struct{}
}

func newReceiver(t *testing.T, secret string, fail func(events.Event, int) bool) (*receiver, *httptest.Server) {
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
	var ev events.Event
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

func (r *receiver) waitFor(n int) []events.Event {
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		got := append([]events.Event(nil), r.got...)
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
	rec, srv := newReceiver(t, "k", func(_ events.Event, try int) bool { return try <= 2 })
	m := NewMetrics()
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k"}},
		Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Metrics: m})
	types := []string{events.SandboxCreated, events.SandboxPaused, events.SandboxResumed, events.SandboxHibernated, events.SandboxResumed, events.SandboxDeleted}
	for _, typ := range types {
		d.Emit(events.Event{Type: typ, Tenant: "acme", Sandbox: "sb1"})
		d.Emit(events.Event{Type: typ, Tenant: "other", Sandbox: "sb2"}) // no endpoint: not sent
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
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k", Events: []string{events.SandboxDeleted}}}, Options{})
	defer d.Close(context.Background())
	d.Emit(events.Event{Type: events.SandboxCreated, Tenant: "acme", Sandbox: "sb1"})
	d.Emit(events.Event{Type: events.SandboxDeleted, Tenant: "acme", Sandbox: "sb1"})
	got := rec.waitFor(1)
	if got[0].Type != events.SandboxDeleted {
		t.Errorf("the endpoint got %s, want only %s", got[0].Type, events.SandboxDeleted)
	}
}

func TestGivenUpAtMaxAge(t *testing.T) {
	_, srv := newReceiver(t, "k", func(events.Event, int) bool { return true })
	m := NewMetrics()
	d := New([]Endpoint{{Tenant: "acme", URL: srv.URL, Secret: "k", MaxAge: 50 * time.Millisecond}},
		Options{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Metrics: m})
	defer d.Close(context.Background())
	d.Emit(events.Event{Type: events.SandboxCreated, Tenant: "acme", Sandbox: "sb1"})
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
			d.Emit(events.Event{Type: events.SandboxCreated, Tenant: "acme", Sandbox: "sb"})
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

func TestJournalKeepsEventsAcrossCloseAndKill(t *testing.T) {
	for _, kill := range []bool{false, true} {
		name := map[bool]string{false: "close", true: "kill"}[kill]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var up sync.Mutex
			down := true
			rec, srv := newReceiver(t, "k", func(events.Event, int) bool { up.Lock(); defer up.Unlock(); return down })
			m := NewMetrics()
			ep := Endpoint{Tenant: "acme", URL: srv.URL, Secret: "k"}
			d := New([]Endpoint{ep}, Options{Backoff: time.Hour, JournalDir: dir, Metrics: m})
			types := []string{events.SandboxCreated, events.SandboxPaused, events.SandboxDeleted}
			for _, typ := range types {
				d.Emit(events.Event{Type: typ, Tenant: "acme", Sandbox: "sb1"})
			}
			// The first attempt fails and waits an hour; the others stay queued.
			waitCount(t, m, OutcomeRetried, 1)
			if kill {
				// A killed process closes nothing: the next start finds
				// the journal as the writes left it. This one sleeps
				// through its hour of backoff until the test ends.
				t.Cleanup(func() { d.Close(context.Background()) })
			} else if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			up.Lock()
			down = false
			up.Unlock()
			d2 := New([]Endpoint{ep}, Options{JournalDir: dir, Metrics: m})
			got := rec.waitFor(len(types))
			for i, ev := range got {
				if ev.Type != types[i] {
					t.Errorf("event %d after the restart is %s, want %s", i, ev.Type, types[i])
				}
			}
			if v := testutil.ToFloat64(m.deliveries.WithLabelValues(OutcomeDropped)); v != 0 {
				t.Errorf("dropped = %v, want 0 (the journal kept them)", v)
			}
			// Delivered, the journal is emptied, and a third start sends
			// nothing again.
			waitCount(t, m, OutcomeDelivered, float64(len(types)))
			if err := d2.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(journalPath(dir, ep)); err != nil || fi.Size() != 0 {
				t.Errorf("the journal after every delivery: %v, %v; want an empty file", fi, err)
			}
			d3 := New([]Endpoint{ep}, Options{JournalDir: dir, Metrics: m})
			d3.Emit(events.Event{Type: events.RunCreated, Tenant: "acme"})
			got = rec.waitFor(len(types) + 1)
			if last := got[len(got)-1]; len(got) != len(types)+1 || last.Type != events.RunCreated {
				t.Errorf("after a third start the receiver got %d events, the last %s; want only the new run.created", len(got), last.Type)
			}
			d3.Close(context.Background())
		})
	}
}

func TestJournalSkipsDoneAndCutLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	lines := `{"event":{"id":"evt_a","type":"sandbox.created","time":"2026-01-01T00:00:00Z","tenant":"acme"}}
{"event":{"id":"evt_b","type":"sandbox.paused","time":"2026-01-01T00:00:01Z","tenant":"acme"}}
{"done":"evt_a"}
{"event":{"id":"evt_c","type":"sandbox.resumed","time":"2026-01-01T00:00:02Z","tenant":"acme"}}
{"event":{"id":"evt_d","type":"sandbox.del`
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	j, left, over, err := openJournal(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if len(left) != 1 || left[0].ID != "evt_b" || over != 1 {
		t.Fatalf("left %+v, over %d; want evt_b, and evt_c over the cap of 1", left, over)
	}
	again, err := readJournal(path)
	if err != nil || len(again) != 1 || again[0].ID != "evt_b" {
		t.Errorf("the rewritten journal holds %+v (%v); want evt_b alone", again, err)
	}
}
