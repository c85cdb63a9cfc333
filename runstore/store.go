// Package runstore keeps the live runs of the API: in memory, in the run
// file of one sandboxd, or in the run records every replica of a
// deployment shares.
package runstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Defaults of a Store.
const (
	DefaultTTL          = 24 * time.Hour
	DefaultMaxPerTenant = 1000
	// DefaultRecordsTimeout bounds each call to the run records.
	DefaultRecordsTimeout = 5 * time.Second
)

// Store holds the live runs in memory. A run that is not used for the
// TTL expires; expiry is checked on every access (there is no sweeping
// goroutine), so an expired run is never served. It is safe for concurrent
// use.
//
// With run records (WithRecords) the top-level runs also live there, so
// that every replica of a deployment serves them and they outlive this
// process; see WithRecords. Each call that reaches the records runs on
// the caller's context, bounded by DefaultRecordsTimeout, so a request
// that is cancelled stops waiting for them. The removal of an ended run's
// record is the exception: the run has already ended here, so its record
// is removed even when the caller has gone. Goroutines: none long-lived;
// with records, at most one short-lived retry of record removals that
// failed, each call bounded by DefaultRecordsTimeout.
type Store struct {
	ttl   time.Duration
	max   int
	now   func() time.Time
	onEnd func(run tools.Run, reason string)
	onNew func(run tools.Run)

	file      string      // the run file ("" keeps runs in memory only)
	onSaveErr func(error) // hears of a failed write of the run file

	records     Records       // the top-level runs of every replica (nil: none)
	onRecordErr func(error)   // hears of a record that could not be removed
	recTimeout  time.Duration // bounds each call to records

	mu        sync.Mutex           // guards runs, perTenant, kids, reserved, tombs, retrying, lastRetry, dirty and the run file
	runs      map[string]*runEntry // by run id
	perTenant map[string]int       // live runs per tenant
	kids      map[string]int       // live child runs per tenant (never in records)
	reserved  map[string]int       // top-level runs per tenant being put into records
	tombs     map[string]tomb      // ended top-level runs hidden from records, by id
	retrying  bool                 // a retry of failed removals is under way
	lastRetry time.Time            // when the last retry started
	dirty     bool                 // a top-level run came or went since the file was written
}

type runEntry struct {
	run      tools.Run
	lastUsed time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithTTL sets how long an unused run lives; <= 0 keeps the default.
func WithTTL(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// WithMaxPerTenant caps a tenant's live runs; <= 0 keeps the default.
func WithMaxPerTenant(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.max = n
		}
	}
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithEndHook is called, outside the store's lock, for every run that
// ends (reason "deleted", "parent ended" or "expired"): workers and
// per-run state hang off it.
func WithEndHook(f func(run tools.Run, reason string)) Option {
	return func(s *Store) { s.onEnd = f }
}

// WithCreateHook is called, outside the store's lock, for every run
// Create made (not for runs restored by Load): the webhooks hang off it.
func WithCreateHook(f func(run tools.Run)) Option {
	return func(s *Store) { s.onNew = f }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		ttl:        DefaultTTL,
		max:        DefaultMaxPerTenant,
		now:        time.Now,
		recTimeout: DefaultRecordsTimeout,
		runs:       map[string]*runEntry{},
		perTenant:  map[string]int{},
		kids:       map[string]int{},
		reserved:   map[string]int{},
		tombs:      map[string]tomb{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.records != nil {
		s.file = "" // the records keep the runs; a file would fork them
	}
	return s
}

type ended struct {
	run    tools.Run
	reason string
	remove bool // its record must be removed
}

// Create stores run under a new id and returns it. The parent, if any,
// must be a live run of the same tenant (else NotFound) and conversation.
// With records, a top-level run is in them before Create returns; when it
// cannot be put there the run is not created (Unavailable).
func (s *Store) Create(ctx context.Context, run tools.Run) (tools.Run, error) {
	shared := s.records != nil && run.Parent == ""
	for attempt := 0; ; attempt++ {
		out, inFlight, err := s.create(ctx, run, shared)
		// A refusal while this replica's own records were being written may
		// have counted one of them twice (in the records and as reserved):
		// once they are written it is asked again.
		if !inFlight || !errors.Is(err, errdefs.ErrResourceExhausted) || attempt == limitRetries || ctx.Err() != nil {
			if err == nil && s.onNew != nil {
				s.onNew(out)
			}
			return out, err
		}
		time.Sleep(limitRetryWait)
	}
}

// limitRetries and limitRetryWait bound Create's second looks at the limit.
const (
	limitRetries   = 50
	limitRetryWait = 10 * time.Millisecond
)

// create is one try of Create; inFlight says that records of the tenant's
// were being written as the limit was checked.
func (s *Store) create(ctx context.Context, run tools.Run, shared bool) (tools.Run, bool, error) {
	recorded := 0
	if s.records != nil {
		recorded = s.records.Count(run.Tenant)
	}
	now := s.now()
	s.mu.Lock()
	gone := s.sweepLocked(now)
	inFlight := s.reserved[run.Tenant] > 0
	err := s.checkCreateLocked(run, recorded)
	if err == nil {
		run.ID = "run_" + uuid.NewString()
		if shared {
			s.reserved[run.Tenant]++ // holds the place while the record is written
		} else {
			s.insertLocked(run, now)
		}
	}
	s.flushLocked()
	s.mu.Unlock()
	s.finish(ctx, gone)
	if err != nil {
		return tools.Run{}, inFlight, err
	}
	if shared {
		if err := s.putRecord(ctx, run); err != nil {
			return tools.Run{}, false, err
		}
	}
	return run, false, nil
}

// checkCreateLocked checks the parent and the tenant's limit. recorded is
// the tenant's count in the records, which hold the top-level runs of
// every replica (this one's too, though a cache may lag its newest).
func (s *Store) checkCreateLocked(run tools.Run, recorded int) error {
	if run.Parent != "" {
		p := s.runs[run.Parent]
		if p == nil || p.run.Tenant != run.Tenant {
			return errdefs.NotFound("parent run %q does not exist or has ended; create the child run from a live run", run.Parent)
		}
		if p.run.Conversation != run.Conversation {
			return errdefs.InvalidArgument("parent run %q belongs to conversation %q, not %q; a child run must use its parent's conversation",
				run.Parent, p.run.Conversation, run.Conversation)
		}
	}
	live := s.perTenant[run.Tenant]
	if s.records != nil {
		live = max(recorded, live-s.kids[run.Tenant]) + s.kids[run.Tenant] + s.reserved[run.Tenant]
	}
	if live >= s.max {
		return errdefs.ResourceExhausted("this tenant already has %d live runs, the limit; delete runs that have finished (DELETE /v1/runs/{id}) and retry", s.max)
	}
	return nil
}

// Get returns the tenant's run and marks it used. Another tenant's run,
// an ended one and an expired one are all NotFound. With records, a run
// that is not in memory is looked up there and kept from then on (another
// replica created it, or held it before), and a top-level run whose record
// was removed by another replica ends here too.
func (s *Store) Get(ctx context.Context, tenant, id string) (tools.Run, error) {
	now := s.now()
	s.mu.Lock()
	var gone []ended
	e := s.runs[id]
	expired := e != nil && now.Sub(e.lastUsed) >= s.ttl
	if expired {
		gone = s.endLocked(id, "expired", nil)
		e = nil
	}
	var run tools.Run
	if e != nil && e.run.Tenant == tenant {
		e.lastUsed = now
		run = e.run
	}
	s.flushLocked()
	s.mu.Unlock()
	s.finish(ctx, gone)
	switch {
	case run.ID != "" && (s.records == nil || run.Parent != ""):
		return run, nil
	case run.ID != "":
		return s.checkRecord(ctx, run)
	case expired || e != nil || s.records == nil:
		return tools.Run{}, NoRun(id)
	}
	return s.adopt(ctx, tenant, id)
}

// Lookup returns the live run id of any tenant, from memory or else from
// the records, without marking it used or keeping it: a router asks it
// which conversation a request is for.
func (s *Store) Lookup(ctx context.Context, id string) (tools.Run, bool) {
	now := s.now()
	s.mu.Lock()
	e := s.runs[id]
	var run tools.Run
	if e != nil && now.Sub(e.lastUsed) < s.ttl {
		run = e.run
	}
	s.mu.Unlock()
	if run.ID != "" {
		return run, true
	}
	if e != nil || s.records == nil {
		return tools.Run{}, false
	}
	rec, err := s.lookupRecord(ctx, id)
	if err != nil || rec.ID != id || rec.Parent != "" {
		return tools.Run{}, false
	}
	return rec, true
}

// List returns the tenant's live runs, sorted by id: with records, those
// of every replica.
func (s *Store) List(ctx context.Context, tenant string) []tools.Run {
	var recs []tools.Run
	if s.records != nil {
		recs = s.records.List(tenant)
	}
	now := s.now()
	s.mu.Lock()
	gone := s.sweepLocked(now)
	out := []tools.Run{}
	for _, e := range s.runs {
		if e.run.Tenant == tenant {
			out = append(out, e.run)
		}
	}
	for _, r := range recs {
		if r.ID != "" && r.Tenant == tenant && r.Parent == "" && s.runs[r.ID] == nil && !s.hiddenLocked(r.ID, now) {
			out = append(out, r)
		}
	}
	s.flushLocked()
	s.mu.Unlock()
	s.finish(ctx, gone)
	slices.SortFunc(out, func(a, b tools.Run) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b tools.Run) bool { return a.ID == b.ID })
}

// Delete ends the tenant's run and, with it, the runs it spawned. With
// records, a run only another replica holds is deleted from the records
// (that replica ends it on its next use).
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	s.mu.Lock()
	e := s.runs[id]
	var gone []ended
	if e != nil && e.run.Tenant == tenant {
		gone = s.endLocked(id, "deleted", nil)
	}
	s.flushLocked()
	s.mu.Unlock()
	s.finish(ctx, gone)
	switch {
	case gone != nil:
		return nil
	case e != nil || s.records == nil:
		return NoRun(id)
	}
	rec, err := s.lookupRecord(ctx, id)
	if err != nil {
		return errdefs.Unavailable("run %q cannot be looked up where every replica sees runs (%v); retry in a moment", id, err)
	}
	if rec.ID != id || rec.Tenant != tenant || rec.Parent != "" {
		return NoRun(id)
	}
	rctx, cancel := context.WithTimeout(ctx, s.recTimeout)
	err = s.records.Remove(rctx, id)
	cancel()
	if err != nil {
		return errdefs.Unavailable("run %q cannot be deleted where every replica sees runs (%v); retry in a moment", id, err)
	}
	s.mu.Lock()
	s.buryLocked(id, true)
	s.mu.Unlock()
	return nil
}

// Active returns the number of live runs in memory, dropping expired ones
// first. It is read at a metrics scrape, which has no caller to cancel:
// the records of the runs it finds expired are removed as every ended
// run's are, on a context of their own.
func (s *Store) Active() int {
	s.mu.Lock()
	gone := s.sweepLocked(s.now())
	n := len(s.runs)
	s.flushLocked()
	s.mu.Unlock()
	s.finish(context.Background(), gone)
	return n
}

// insertLocked adds run to memory, used at now.
func (s *Store) insertLocked(run tools.Run, now time.Time) {
	s.runs[run.ID] = &runEntry{run: run, lastUsed: now}
	s.perTenant[run.Tenant]++
	if run.Parent != "" {
		s.kids[run.Tenant]++
	}
	s.dirty = s.dirty || run.Parent == ""
}

// sweepLocked removes every expired run.
func (s *Store) sweepLocked(now time.Time) []ended {
	var gone []ended
	for id, e := range s.runs {
		if _, still := s.runs[id]; still && now.Sub(e.lastUsed) >= s.ttl {
			gone = s.endLocked(id, "expired", gone)
		}
	}
	s.pruneTombsLocked(now)
	return gone
}

// endLocked is removeLocked for a run that ends everywhere: its record,
// if any, is to be removed (finish does) and is hidden until then.
func (s *Store) endLocked(id, reason string, gone []ended) []ended {
	n := len(gone)
	gone = s.removeLocked(id, reason, gone)
	for i := n; i < len(gone); i++ {
		if s.records != nil && gone[i].run.Parent == "" {
			gone[i].remove = true
			s.buryLocked(gone[i].run.ID, false)
		}
	}
	return gone
}

// removeLocked removes id and its descendants from memory, appending them
// to gone.
func (s *Store) removeLocked(id, reason string, gone []ended) []ended {
	e := s.runs[id]
	if e == nil {
		return gone
	}
	delete(s.runs, id)
	s.dirty = s.dirty || e.run.Parent == ""
	if s.perTenant[e.run.Tenant]--; s.perTenant[e.run.Tenant] <= 0 {
		delete(s.perTenant, e.run.Tenant)
	}
	if e.run.Parent != "" {
		if s.kids[e.run.Tenant]--; s.kids[e.run.Tenant] <= 0 {
			delete(s.kids, e.run.Tenant)
		}
	}
	gone = append(gone, ended{run: e.run, reason: reason})
	for cid, c := range s.runs {
		if c.run.Parent == id {
			gone = s.removeLocked(cid, "parent ended", gone)
		}
	}
	return gone
}

// finish removes the records of the runs that ended, then tells the hook;
// it runs outside the lock. The runs have already ended here, so their
// records are removed even when ctx is cancelled (ctx gives only its
// values): a record left behind would be served by other replicas, and
// count against the tenant, until a retry.
func (s *Store) finish(ctx context.Context, gone []ended) {
	for _, g := range gone {
		if g.remove {
			s.removeRecord(context.WithoutCancel(ctx), g.run.ID)
		}
	}
	s.notify(gone)
	s.maybeRetry()
}

func (s *Store) notify(gone []ended) {
	if s.onEnd == nil {
		return
	}
	for _, g := range gone {
		s.onEnd(g.run, g.reason)
	}
}

// NoRun is the error of a run that is not live for the caller: it does not
// exist, has ended, or belongs to another tenant (the API responds to all three
// alike, so an id says nothing about other tenants).
func NoRun(id string) error {
	return errdefs.NotFound("run %q does not exist or has ended; create a run with POST /v1/runs", id)
}
