// Package callrec keeps the recent tool calls of each run in memory, for
// the console's live call view: a bounded ring per run, a cap on the runs
// kept, and subscribers that get each call as it finishes. It is the
// registry's CallRecorder.
package callrec

import (
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// Defaults of a Recorder.
const (
	DefaultPerRun = 200  // calls kept per run
	DefaultRuns   = 1000 // runs kept; the one idle longest goes first
	// DefaultSubscriberBuffer is how many calls may wait for one
	// subscriber; a subscriber further behind is dropped.
	DefaultSubscriberBuffer = 64
)

// Call is one finished tool call as the console shows it.
type Call struct {
	Seq        uint64    `json:"seq"` // per run, from 1
	Run        string    `json:"run"`
	Tool       string    `json:"tool"`
	Level      string    `json:"level"`
	Args       string    `json:"args"` // the short form (Summarize)
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	Outcome    string    `json:"outcome"`
	// Diagnostics is the number of new problems diagnostics-on-write
	// reported after the call's write; left out when it reported nothing.
	Diagnostics *int `json:"diagnostics,omitempty"`
}

// Recorder holds the calls. It starts no goroutines; Record never blocks on
// a subscriber. Safe for concurrent use.
type Recorder struct {
	perRun, maxRuns, subBuf int

	mu   sync.Mutex      // guards runs and tick
	runs map[string]*log // by run id
	tick uint64          // increases with every call recorded, for finding the idlest run
}

type log struct {
	tenant string
	calls  []Call // a ring of at most perRun, oldest at head once full
	head   int
	seq    uint64
	last   uint64 // the Recorder's tick at this run's latest call
	subs   map[*Subscription]struct{}
}

// Option configures a Recorder.
type Option func(*Recorder)

// WithPerRun sets how many calls are kept per run (<= 0 keeps the default).
func WithPerRun(n int) Option {
	return func(r *Recorder) {
		if n > 0 {
			r.perRun = n
		}
	}
}

// WithMaxRuns sets how many runs are kept (<= 0 keeps the default).
func WithMaxRuns(n int) Option {
	return func(r *Recorder) {
		if n > 0 {
			r.maxRuns = n
		}
	}
}

// WithSubscriberBuffer sets how far one subscriber may fall behind before
// it is dropped (<= 0 keeps the default).
func WithSubscriberBuffer(n int) Option {
	return func(r *Recorder) {
		if n > 0 {
			r.subBuf = n
		}
	}
}

// New returns an empty Recorder.
func New(opts ...Option) *Recorder {
	r := &Recorder{perRun: DefaultPerRun, maxRuns: DefaultRuns, subBuf: DefaultSubscriberBuffer, runs: map[string]*log{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

var (
	_ tools.CallObserver = (*Recorder)(nil)
	_ tools.CallRecorder = (*Recorder)(nil)
)

// ObserveToolCall does nothing: the Recorder needs the full record.
func (r *Recorder) ObserveToolCall(string, tools.Level, string, time.Duration) {}

// RecordToolCall keeps the call in its run's ring and hands it to the
// run's subscribers; one that has no room is dropped (its Done closes).
func (r *Recorder) RecordToolCall(rec tools.CallRecord) {
	if rec.Run == nil || rec.Run.ID == "" {
		return
	}
	c := Call{
		Run:        rec.Run.ID,
		Tool:       rec.Tool,
		Level:      string(rec.Level),
		Args:       Summarize(rec.Args),
		StartedAt:  rec.Started.UTC(),
		DurationMS: float64(rec.Duration.Microseconds()) / 1000,
		Outcome:    rec.Outcome,
	}
	if n, ok := Diagnostics(rec.Result); ok {
		c.Diagnostics = &n
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.runs[c.Run]
	if l == nil {
		if len(r.runs) >= r.maxRuns {
			r.evictLocked()
		}
		l = &log{tenant: rec.Run.Tenant, subs: map[*Subscription]struct{}{}}
		r.runs[c.Run] = l
	}
	if l.tenant != rec.Run.Tenant {
		return // a run id is one tenant's; never mix another's calls in
	}
	r.tick++
	l.last = r.tick
	l.seq++
	c.Seq = l.seq
	if len(l.calls) < r.perRun {
		l.calls = append(l.calls, c)
	} else {
		l.calls[l.head] = c
		l.head = (l.head + 1) % len(l.calls)
	}
	for s := range l.subs {
		select {
		case s.ch <- c:
		default:
			delete(l.subs, s)
			s.end()
		}
	}
}

// evictLocked forgets the run whose latest call is oldest.
func (r *Recorder) evictLocked() {
	var idlest string
	var min uint64
	for id, l := range r.runs {
		if idlest == "" || l.last < min {
			idlest, min = id, l.last
		}
	}
	r.forgetLocked(idlest)
}

// Calls returns the tenant's run's kept calls, oldest first; none for a
// run of another tenant.
func (r *Recorder) Calls(tenant, run string) []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backlogLocked(tenant, run)
}

func (r *Recorder) backlogLocked(tenant, run string) []Call {
	l := r.runs[run]
	if l == nil || l.tenant != tenant {
		return []Call{}
	}
	out := make([]Call, 0, len(l.calls))
	out = append(out, l.calls[l.head:]...)
	return append(out, l.calls[:l.head]...)
}

// Subscribe returns the run's kept calls and a subscription to the calls
// that finish from then on, with nothing lost or repeated in between.
// Close it when done.
func (r *Recorder) Subscribe(tenant, run string) (*Subscription, []Call) {
	s := &Subscription{r: r, run: run, ch: make(chan Call, r.subBuf), done: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	backlog := r.backlogLocked(tenant, run)
	l := r.runs[run]
	if l == nil {
		// The run has made no call yet: hold its place, so the first call
		// reaches this subscriber.
		if len(r.runs) >= r.maxRuns {
			r.evictLocked()
		}
		r.tick++
		l = &log{tenant: tenant, last: r.tick, subs: map[*Subscription]struct{}{}}
		r.runs[run] = l
	}
	if l.tenant != tenant {
		s.end() // another tenant's run: nothing to see, now or later
		return s, backlog
	}
	l.subs[s] = struct{}{}
	return s, backlog
}

// Forget drops a run's calls and ends its subscriptions (the run ended).
func (r *Recorder) Forget(run string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(run)
}

func (r *Recorder) forgetLocked(run string) {
	l := r.runs[run]
	if l == nil {
		return
	}
	for s := range l.subs {
		s.end()
	}
	delete(r.runs, run)
}

// Subscription is one reader of a run's calls.
type Subscription struct {
	r    *Recorder
	run  string
	ch   chan Call
	done chan struct{}
	once sync.Once
}

// Events delivers the run's calls as they finish.
func (s *Subscription) Events() <-chan Call { return s.ch }

// Done closes when the subscription ends: it fell too far behind, the run
// was forgotten, or Close was called. Calls already in Events may remain.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Close ends the subscription. Safe to call more than once.
func (s *Subscription) Close() {
	s.r.mu.Lock()
	if l := s.r.runs[s.run]; l != nil {
		delete(l.subs, s)
	}
	s.r.mu.Unlock()
	s.end()
}

func (s *Subscription) end() { s.once.Do(func() { close(s.done) }) }
