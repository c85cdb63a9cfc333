package questions

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Defaults of a Port.
const (
	DefaultExpiry    = 10 * time.Minute
	DefaultMaxExpiry = time.Hour
	DefaultHeartbeat = 15 * time.Second
	// DefaultMaxPending caps the pending questions of one space.
	DefaultMaxPending = 200
	// resolvedKeep is how many resolved question ids are remembered, so a
	// late second answer is a 409 rather than a 404.
	resolvedKeep = 4096
	// subBuffer is how many events a subscriber may lag behind before it
	// is dropped (its stream ends and the console reconnects).
	subBuffer = 256
)

// Port holds the pending questions and the humans' subscriptions. It is
// safe for concurrent use. Goroutines: none of its own; each pending
// question has an expiry timer (time.AfterFunc). Shutdown: Close resolves
// every pending question as expired (callers return) and ends every
// subscription; after Close, Ask fails at once.
type Port struct {
	defExpiry  time.Duration
	maxExpiry  time.Duration
	heartbeat  time.Duration
	maxPending int

	mu       sync.Mutex             // guards everything below
	pending  map[string]*entry      // by question id
	resolved map[string]resolvedRec // recently resolved, by question id
	order    []string               // resolved ids, oldest first (bounded)
	spaces   map[spaceKey]map[*Subscription]struct{}
	closed   bool

	observe func(tenant string, q Question, r *Resolution) // nil: none
}

type spaceKey struct{ tenant, space string }

type entry struct {
	q      Question
	tenant string
	done   chan Resolution // buffered 1; receives exactly one resolution
	timer  *time.Timer
}

type resolvedRec struct {
	tenant string
	status string
}

// PortOption configures a Port.
type PortOption func(*Port)

// WithExpiry sets the default and the maximum time a question stays open;
// values <= 0 keep the defaults.
func WithExpiry(def, max time.Duration) PortOption {
	return func(p *Port) {
		if def > 0 {
			p.defExpiry = def
		}
		if max > 0 {
			p.maxExpiry = max
		}
	}
}

// WithHeartbeat sets how often streams send a comment, which is how a dead
// stream is found; <= 0 keeps the default.
func WithHeartbeat(d time.Duration) PortOption {
	return func(p *Port) {
		if d > 0 {
			p.heartbeat = d
		}
	}
}

// WithMaxPending caps the pending questions per space; <= 0 keeps the default.
func WithMaxPending(n int) PortOption {
	return func(p *Port) {
		if n > 0 {
			p.maxPending = n
		}
	}
}

// WithObserver hears every question asked (r nil) and resolved (r its
// resolution: answered, skipped, expired, withdrawn or canceled). It is
// called with the port's lock held, so a question's resolution comes after
// its asking; it must not block. The webhooks hang off it.
func WithObserver(f func(tenant string, q Question, r *Resolution)) PortOption {
	return func(p *Port) { p.observe = f }
}

// New returns an empty port.
func New(opts ...PortOption) *Port {
	p := &Port{
		defExpiry:  DefaultExpiry,
		maxExpiry:  DefaultMaxExpiry,
		heartbeat:  DefaultHeartbeat,
		maxPending: DefaultMaxPending,
		pending:    map[string]*entry{},
		resolved:   map[string]resolvedRec{},
		spaces:     map[spaceKey]map[*Subscription]struct{}{},
	}
	for _, o := range opts {
		o(p)
	}
	if p.defExpiry > p.maxExpiry {
		p.defExpiry = p.maxExpiry
	}
	return p
}

// Heartbeat is how often a stream should send a keep-alive comment.
func (p *Port) Heartbeat() time.Duration { return p.heartbeat }

// MaxExpiry is the longest a question may stay open.
func (p *Port) MaxExpiry() time.Duration { return p.maxExpiry }

// Connected reports whether a human has a stream open on the space.
func (p *Port) Connected(tenant, space string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.spaces[spaceKey{tenant, space}]) > 0
}

// Ask puts q on its space and blocks until it is answered, skipped, expires
// (after expiry, 0 meaning the default, capped at the maximum), is canceled
// with its run, or ctx ends (the card is withdrawn and ctx's error
// returned). With no human connected to the space it fails at once with a
// FailedPrecondition error: a caller never blocks on an empty room.
func (p *Port) Ask(ctx context.Context, tenant string, q Question, expiry time.Duration) (Question, Resolution, error) {
	if err := validateQuestion(&q); err != nil {
		return q, Resolution{}, err
	}
	if expiry <= 0 {
		expiry = p.defExpiry
	}
	expiry = min(expiry, p.maxExpiry)
	key := spaceKey{tenant, q.Space}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return q, Resolution{}, errdefs.Unavailable("sandboxd is shutting down and takes no questions; retry after it restarts")
	}
	if len(p.spaces[key]) == 0 {
		p.mu.Unlock()
		return q, Resolution{}, errdefs.FailedPrecondition("no human is connected to space %q, so nobody can answer; continue without asking", q.Space)
	}
	n := 0
	for _, e := range p.pending {
		if e.tenant == tenant && e.q.Space == q.Space {
			n++
		}
	}
	if n >= p.maxPending {
		p.mu.Unlock()
		return q, Resolution{}, errdefs.ResourceExhausted("space %q already has %d open questions, the limit; wait for answers before asking more", q.Space, n)
	}
	q.ID = "q_" + uuid.NewString()
	q.ExpiresAt = time.Now().Add(expiry).UTC().Truncate(time.Millisecond)
	e := &entry{q: q, tenant: tenant, done: make(chan Resolution, 1)}
	p.pending[q.ID] = e
	e.timer = time.AfterFunc(expiry, func() { p.resolve(q.ID, Resolution{Status: StatusExpired}) })
	p.publishLocked(key, Event{Type: EventQuestion, Question: &q})
	if p.observe != nil {
		p.observe(tenant, q, nil)
	}
	p.mu.Unlock()

	select {
	case r := <-e.done:
		return q, r, nil
	case <-ctx.Done():
		p.resolve(q.ID, Resolution{Status: StatusWithdrawn})
		// The answer may have won the race; it counts.
		if r := <-e.done; r.Status == StatusAnswered || r.Status == StatusSkipped {
			return q, r, nil
		}
		return q, Resolution{}, ctx.Err()
	}
}

// Pending lists the space's open questions, oldest first.
func (p *Port) Pending(tenant, space string) []Question {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pendingLocked(spaceKey{tenant, space})
}

func (p *Port) pendingLocked(key spaceKey) []Question {
	out := []Question{}
	for _, e := range p.pending {
		if e.tenant == key.tenant && e.q.Space == key.space {
			out = append(out, e.q)
		}
	}
	slices.SortFunc(out, func(a, b Question) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return out
}

// Get returns the tenant's pending question.
func (p *Port) Get(tenant, id string) (Question, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.pending[id]
	if e == nil || e.tenant != tenant {
		return Question{}, false
	}
	return e.q, true
}

// Answer answers the tenant's question. An invalid answer is an
// InvalidArgument error and leaves the question open; a question already
// resolved is a Conflict; another tenant's or an unknown one is NotFound.
func (p *Port) Answer(tenant, id string, a Answer) error {
	p.mu.Lock()
	e := p.pending[id]
	if e == nil || e.tenant != tenant {
		rec, ok := p.resolved[id]
		p.mu.Unlock()
		if ok && rec.tenant == tenant {
			return errdefs.Conflict("question %q is no longer open (it was %s); list the open questions of its space", id, rec.status)
		}
		return errdefs.NotFound("question %q does not exist; list the open questions with GET /v1/spaces/{space}/questions", id)
	}
	if err := validateAnswer(e.q, &a); err != nil {
		p.mu.Unlock()
		return err
	}
	r := Resolution{Status: StatusAnswered, Choices: a.Choices, Text: a.Text}
	if a.Skip {
		r = Resolution{Status: StatusSkipped}
	}
	p.resolveLocked(e, r)
	p.mu.Unlock()
	return nil
}

// CancelRun resolves the run's pending questions as canceled (the run
// ended, so nobody waits for them any more).
func (p *Port) CancelRun(runID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.pending {
		if e.q.Run == runID {
			p.resolveLocked(e, Resolution{Status: StatusCanceled})
		}
	}
}

// Close reports every pending question to its caller as expired and ends
// every subscription. Ask fails afterwards.
func (p *Port) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, e := range p.pending {
		p.resolveLocked(e, Resolution{Status: StatusExpired})
	}
	for key, subs := range p.spaces {
		for s := range subs {
			s.endLocked()
		}
		delete(p.spaces, key)
	}
}

func (p *Port) resolve(id string, r Resolution) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.pending[id]; e != nil {
		p.resolveLocked(e, r)
	}
}

// resolveLocked ends a pending question: its caller gets r, the space's
// streams get a `resolved` event, and its id is remembered for 409s.
func (p *Port) resolveLocked(e *entry, r Resolution) {
	if e.timer != nil {
		e.timer.Stop()
	}
	delete(p.pending, e.q.ID)
	r.ID, r.Space = e.q.ID, e.q.Space
	e.done <- r
	p.resolved[e.q.ID] = resolvedRec{tenant: e.tenant, status: r.Status}
	p.order = append(p.order, e.q.ID)
	if len(p.order) > resolvedKeep {
		delete(p.resolved, p.order[0])
		p.order = p.order[1:]
	}
	p.publishLocked(spaceKey{e.tenant, e.q.Space}, Event{Type: EventResolved, Resolved: &r})
	if p.observe != nil {
		p.observe(e.tenant, e.q, &r)
	}
}

// PendingByKind counts the questions waiting for an answer, by kind
// (KindQuestion, KindPermission), for the metrics.
func (p *Port) PendingByKind() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, e := range p.pending {
		out[e.q.Kind]++
	}
	return out
}
