// Package webhooks POSTs sandboxd's lifecycle events to the URLs a tenant
// configured, signed, at least once, in order per sandbox, never blocking
// the call that made the event.
//
// Goroutines: one per configured endpoint (its worker), started by New and
// ended by Close. Nothing else runs; Emit only appends to queues.
//
// Durability: with Options.JournalDir each endpoint's events are written
// to its journal before they are queued and marked there once delivered
// or given up, so the next New queues again what a stop or a kill of the
// process left (docs/DESIGN.md, Webhooks).
//
// Shutdown order (Close): stop taking events; cancel the attempt in flight
// (its request's context ends); each worker returns; the journals are
// closed with what is not delivered still in them, or without a journal
// the events still queued are counted as dropped.
package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/events"
)

// Types are the event types a webhook is sent, the values its events may
// name; the others (previews, egress decisions) go to the audit record only.
var Types = []string{events.SandboxCreated, events.SandboxPaused, events.SandboxResumed, events.SandboxHibernated,
	events.SandboxDeleted, events.RunCreated, events.RunEnded, events.QuestionAsked, events.QuestionAnswered}

// Endpoint is one configured webhook of a tenant.
type Endpoint struct {
	Tenant string
	URL    string
	Events []string // empty: every type
	Secret string
	// MaxAge is how long an event is retried after it happened; 0 means
	// the dispatcher's default.
	MaxAge time.Duration
}

// Defaults of Options.
const (
	DefaultMaxAge     = time.Hour
	DefaultQueueCap   = 1000
	DefaultTimeout    = 10 * time.Second
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 5 * time.Minute
)

// Options tune a Dispatcher; zero fields take the defaults above.
type Options struct {
	MaxAge     time.Duration // default max age of an event
	QueueCap   int           // events queued per endpoint; a full queue drops the new event
	Timeout    time.Duration // one attempt's deadline
	Backoff    time.Duration // the first retry's wait; it doubles per attempt
	MaxBackoff time.Duration // the longest wait between attempts
	// JournalDir keeps each endpoint's events until they are delivered,
	// a file per endpoint, for the next New with the same endpoint to
	// send what is left; "" keeps them in memory only.
	JournalDir string
	Client     *http.Client
	Log        *slog.Logger
	Metrics    *Metrics
}

// Dispatcher delivers events to the endpoints. Its methods are safe for
// concurrent use.
type Dispatcher struct {
	opts    Options
	workers []*worker
	stop    chan struct{}
	ctx     context.Context // ends at Close: cancels an attempt in flight
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	// emitting is held shared by Emit while it queues and taken by Close
	// to stop: no event is queued after Close has drained the queues.
	emitting sync.RWMutex
}

// New starts one worker per endpoint.
func New(endpoints []Endpoint, o Options) *Dispatcher {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.QueueCap <= 0 {
		o.QueueCap = DefaultQueueCap
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	d := &Dispatcher{opts: o, stop: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for _, ep := range endpoints {
		if ep.MaxAge <= 0 {
			ep.MaxAge = o.MaxAge
		}
		w := &worker{d: d, ep: ep, queue: make(chan queued, o.QueueCap)}
		d.restore(w)
		d.workers = append(d.workers, w)
		d.wg.Add(1)
		go w.run()
	}
	return d
}

var _ events.Sink = (*Dispatcher)(nil)

// Emit queues ev for every endpoint of its tenant that wants its type (one
// of Types). It never blocks: an endpoint whose queue is full drops ev and
// counts it. ev's ID and Time are filled in when empty.
func (d *Dispatcher) Emit(ev events.Event) {
	if d == nil || !slices.Contains(Types, ev.Type) {
		return
	}
	if ev.ID == "" {
		ev.ID = events.NewID()
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	d.emitting.RLock()
	defer d.emitting.RUnlock()
	select {
	case <-d.stop:
		return // stopped: nothing is queued any more
	default:
	}
	for _, w := range d.workers {
		if w.ep.Tenant != ev.Tenant || (len(w.ep.Events) > 0 && !slices.Contains(w.ep.Events, ev.Type)) {
			continue
		}
		w.enqueue(ev)
	}
}

// Close stops the workers, bounded by ctx. Events not delivered stay in
// their journal for the next start; those without one are counted as
// dropped.
func (d *Dispatcher) Close(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.once.Do(func() {
		d.emitting.Lock()
		close(d.stop)
		d.emitting.Unlock()
		d.cancel()
	})
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("webhook workers still running at the deadline: %w", ctx.Err())
	}
	for _, w := range d.workers {
		for n := len(w.queue); n > 0; n-- {
			q := <-w.queue
			d.opts.Metrics.queue(-1)
			if !q.kept {
				d.opts.Metrics.count(OutcomeDropped)
			}
		}
		for range w.lost {
			d.opts.Metrics.count(OutcomeDropped)
		}
		if w.j != nil {
			w.j.close()
		}
	}
	return nil
}

// worker delivers one endpoint's events one at a time, in the order they
// were emitted: so a sandbox's later event waits for its earlier one. The
// cost is that one slow event holds back the endpoint's other sandboxes'.
type worker struct {
	d     *Dispatcher
	ep    Endpoint
	queue chan queued
	j     *journal // nil without a journal dir, or when it cannot be opened

	// mu orders enqueue's journal line and its send: an event is in the
	// journal before the worker can take it, and the queue's free room
	// checked under it stays free until the send.
	mu sync.Mutex
	// lost counts the events not in the journal whose attempt the
	// dispatcher's stop cut; read by Close after the worker ended.
	lost int
}

// queued is an event on a worker's queue; kept says its journal has it.
type queued struct {
	ev   events.Event
	kept bool
}

// enqueue writes ev to the journal and queues it, or drops and counts it
// when the queue is full. It never waits for the worker.
func (w *worker) enqueue(ev events.Event) {
	o := w.d.opts
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == cap(w.queue) {
		o.Metrics.count(OutcomeDropped)
		o.Log.Warn("a webhook event was dropped: the endpoint's queue is full", "url", w.ep.URL, "type", ev.Type, "cap", o.QueueCap)
		return
	}
	q := queued{ev: ev}
	if w.j != nil {
		if err := w.j.add(ev); err != nil {
			o.Log.Warn("a webhook event is not journaled; a stop before its delivery loses it", "url", w.ep.URL, "type", ev.Type, "err", err)
		} else {
			q.kept = true
		}
	}
	w.queue <- q
	o.Metrics.queue(1)
}

func (w *worker) run() {
	defer w.d.wg.Done()
	for {
		select {
		case <-w.d.stop:
			return // before taking another event, whatever is queued
		default:
		}
		select {
		case <-w.d.stop:
			return
		case q := <-w.queue:
			w.d.opts.Metrics.queue(-1)
			finished := w.deliver(q.ev)
			switch {
			case !finished && !q.kept:
				w.lost++
			case finished && q.kept:
				if err := w.j.done(q.ev.ID); err != nil {
					w.d.opts.Log.Warn("a delivered webhook event is not marked in the journal; it may be sent again after a restart", "url", w.ep.URL, "id", q.ev.ID, "err", err)
				}
			}
		}
	}
}

// deliver tries ev until it is delivered, it is older than the max age,
// or the dispatcher stops; finished is false in the last case only.
func (w *worker) deliver(ev events.Event) (finished bool) {
	o := w.d.opts
	body, err := json.Marshal(ev)
	if err != nil {
		o.Metrics.count(OutcomeFailed) // an Event always marshals; kept for the record
		return true
	}
	for attempt := 0; ; attempt++ {
		err := w.post(ev, body)
		if err == nil {
			o.Metrics.count(OutcomeDelivered)
			return true
		}
		if w.d.ctx.Err() != nil {
			return false // stopped during the attempt
		}
		wait, ok := NextWait(attempt, time.Since(ev.Time), w.ep.MaxAge, o.Backoff, o.MaxBackoff)
		if !ok {
			o.Metrics.count(OutcomeFailed)
			o.Log.Warn("a webhook event was given up: not delivered within its max age", "url", w.ep.URL,
				"type", ev.Type, "id", ev.ID, "max_age", w.ep.MaxAge, "err", err)
			return true
		}
		o.Metrics.count(OutcomeRetried)
		o.Log.Info("webhook delivery failed; retrying", "url", w.ep.URL, "type", ev.Type, "id", ev.ID, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-w.d.stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// NextWait is the wait before the attempt after attempt (0 is the first)
// for an event age old: Backoff doubled per attempt, at most maxBackoff,
// and never past maxAge. ok is false when the event is maxAge old already:
// it is given up.
func NextWait(attempt int, age, maxAge, backoff, maxBackoff time.Duration) (wait time.Duration, ok bool) {
	left := maxAge - age
	if left <= 0 {
		return 0, false
	}
	wait = backoff
	for i := 0; i < attempt && wait < maxBackoff; i++ {
		wait *= 2
	}
	return min(wait, maxBackoff, left), true
}

// post makes one attempt, bounded by the attempt timeout and Close.
func (w *worker) post(ev events.Event, body []byte) error {
	ctx, cancel := context.WithTimeout(w.d.ctx, w.d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.ep.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sandboxd-webhooks")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(w.ep.Secret, ts, body))
	req.Header.Set(HeaderEventID, ev.ID)
	req.Header.Set(HeaderEventType, ev.Type)
	resp, err := w.d.opts.Client.Do(req)
	if err != nil {
		return err
	}
	// Read a little so the connection can be reused; the answer's body
	// means nothing to us.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}
