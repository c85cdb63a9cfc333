package api

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Defaults of a RunStore.
const (
	DefaultRunTTL           = 24 * time.Hour
	DefaultMaxRunsPerTenant = 1000
)

// RunStore holds the live runs in memory. A run that is not used for the
// TTL expires; expiry is checked on every access (there is no goroutine),
// so an expired run is never served. It is safe for concurrent use.
type RunStore struct {
	ttl   time.Duration
	max   int
	now   func() time.Time
	onEnd func(run tools.Run, reason string)

	file      string      // the run file ("" keeps runs in memory only)
	onSaveErr func(error) // hears of a failed write of the run file

	mu        sync.Mutex           // guards runs, perTenant, dirty and the run file
	runs      map[string]*runEntry // by run id
	perTenant map[string]int       // live runs per tenant
	dirty     bool                 // a top-level run came or went since the file was written
}

type runEntry struct {
	run      tools.Run
	lastUsed time.Time
}

// RunOption configures a RunStore.
type RunOption func(*RunStore)

// WithRunTTL sets how long an unused run lives; <= 0 keeps the default.
func WithRunTTL(d time.Duration) RunOption {
	return func(s *RunStore) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// WithMaxRunsPerTenant caps a tenant's live runs; <= 0 keeps the default.
func WithMaxRunsPerTenant(n int) RunOption {
	return func(s *RunStore) {
		if n > 0 {
			s.max = n
		}
	}
}

// WithRunClock replaces time.Now (tests).
func WithRunClock(now func() time.Time) RunOption { return func(s *RunStore) { s.now = now } }

// WithRunEndHook is called, outside the store's lock, for every run that
// ends (reason "deleted", "parent ended" or "expired"): workers and
// per-run state hang off it.
func WithRunEndHook(f func(run tools.Run, reason string)) RunOption {
	return func(s *RunStore) { s.onEnd = f }
}

// NewRunStore returns an empty store.
func NewRunStore(opts ...RunOption) *RunStore {
	s := &RunStore{
		ttl:       DefaultRunTTL,
		max:       DefaultMaxRunsPerTenant,
		now:       time.Now,
		runs:      map[string]*runEntry{},
		perTenant: map[string]int{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

type ended struct {
	run    tools.Run
	reason string
}

// Create stores run under a new id and returns it. The parent, if any,
// must be a live run of the same tenant (else NotFound) and conversation.
func (s *RunStore) Create(run tools.Run) (tools.Run, error) {
	now := s.now()
	s.mu.Lock()
	gone := s.sweepLocked(now)
	err := s.checkCreateLocked(run)
	if err == nil {
		run.ID = "run_" + uuid.NewString()
		s.runs[run.ID] = &runEntry{run: run, lastUsed: now}
		s.perTenant[run.Tenant]++
		s.dirty = s.dirty || run.Parent == ""
	}
	s.flushLocked()
	s.mu.Unlock()
	s.notify(gone)
	if err != nil {
		return tools.Run{}, err
	}
	return run, nil
}

func (s *RunStore) checkCreateLocked(run tools.Run) error {
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
	if s.perTenant[run.Tenant] >= s.max {
		return errdefs.ResourceExhausted("this tenant already has %d live runs, the limit; delete runs that have finished (DELETE /v1/runs/{id}) and retry", s.max)
	}
	return nil
}

// Get returns the tenant's run and marks it used. Another tenant's run,
// an ended one and an expired one are all NotFound.
func (s *RunStore) Get(tenant, id string) (tools.Run, error) {
	now := s.now()
	s.mu.Lock()
	var gone []ended
	e := s.runs[id]
	if e != nil && now.Sub(e.lastUsed) >= s.ttl {
		gone = s.removeLocked(id, "expired", nil)
		e = nil
	}
	if e != nil && e.run.Tenant == tenant {
		e.lastUsed = now
	}
	s.flushLocked()
	s.mu.Unlock()
	s.notify(gone)
	if e == nil || e.run.Tenant != tenant {
		return tools.Run{}, errNoRun(id)
	}
	return e.run, nil
}

// List returns the tenant's live runs, sorted by id.
func (s *RunStore) List(tenant string) []tools.Run {
	s.mu.Lock()
	gone := s.sweepLocked(s.now())
	out := []tools.Run{}
	for _, e := range s.runs {
		if e.run.Tenant == tenant {
			out = append(out, e.run)
		}
	}
	s.flushLocked()
	s.mu.Unlock()
	s.notify(gone)
	slices.SortFunc(out, func(a, b tools.Run) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Delete ends the tenant's run and, with it, the runs it spawned.
func (s *RunStore) Delete(tenant, id string) error {
	s.mu.Lock()
	e := s.runs[id]
	var gone []ended
	if e != nil && e.run.Tenant == tenant {
		gone = s.removeLocked(id, "deleted", nil)
	}
	s.flushLocked()
	s.mu.Unlock()
	s.notify(gone)
	if gone == nil {
		return errNoRun(id)
	}
	return nil
}

// Active returns the number of live runs, dropping expired ones first.
func (s *RunStore) Active() int {
	s.mu.Lock()
	gone := s.sweepLocked(s.now())
	n := len(s.runs)
	s.flushLocked()
	s.mu.Unlock()
	s.notify(gone)
	return n
}

// sweepLocked removes every expired run.
func (s *RunStore) sweepLocked(now time.Time) []ended {
	var gone []ended
	for id, e := range s.runs {
		if _, still := s.runs[id]; still && now.Sub(e.lastUsed) >= s.ttl {
			gone = s.removeLocked(id, "expired", gone)
		}
	}
	return gone
}

// removeLocked removes id and its descendants, appending them to gone.
func (s *RunStore) removeLocked(id, reason string, gone []ended) []ended {
	e := s.runs[id]
	if e == nil {
		return gone
	}
	delete(s.runs, id)
	s.dirty = s.dirty || e.run.Parent == ""
	if s.perTenant[e.run.Tenant]--; s.perTenant[e.run.Tenant] <= 0 {
		delete(s.perTenant, e.run.Tenant)
	}
	gone = append(gone, ended{e.run, reason})
	for cid, c := range s.runs {
		if c.run.Parent == id {
			gone = s.removeLocked(cid, "parent ended", gone)
		}
	}
	return gone
}

func (s *RunStore) notify(gone []ended) {
	if s.onEnd == nil {
		return
	}
	for _, g := range gone {
		s.onEnd(g.run, g.reason)
	}
}

func errNoRun(id string) error {
	return errdefs.NotFound("run %q does not exist or has ended; create a run with POST /v1/runs", id)
}
