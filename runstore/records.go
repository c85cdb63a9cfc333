package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"

	"github.com/sandboxd/sandboxd/tools"
)

// Records keeps the top-level runs of every replica of a deployment, so
// that any replica serves a run another one created and runs outlive the
// replica that created them. List and Count read from what the records
// hold at hand (a cache) and never block on the network; Get may ask
// further (a run created a moment ago elsewhere).
type Records interface {
	// Put stores run under run.ID, replacing a record of the same id.
	Put(ctx context.Context, run tools.Run) error
	// Remove deletes the record of id; a missing record is no error.
	Remove(ctx context.Context, id string) error
	// Get returns the record of id; a missing one is false and no error.
	Get(ctx context.Context, id string) (tools.Run, bool, error)
	// List returns the tenant's recorded runs, in no particular order.
	List(tenant string) []tools.Run
	// Count is len(List(tenant)) without building the list.
	Count(tenant string) int
}

// WithRecords keeps the top-level runs in r as well as in memory, for
// replicas: Create puts a run there before returning it, Get and Delete of
// a run that is not in memory look there (Get then keeps it in memory),
// List adds the tenant's recorded runs, and the per-tenant limit counts
// them. A run that ends here (deleted, expired) has its record removed;
// onErr hears of a removal that failed (the run stays ended here and the
// removal is retried). Child runs stay in memory only, as their workers do.
// The run file is not used with records.
func WithRecords(r Records, onErr func(error)) Option {
	return func(s *Store) { s.records, s.onRecordErr = r, onErr }
}

// Bounds of the ids of ended runs that are hidden from the records.
const (
	maxTombs         = 4096             // at most this many ended ids are kept
	tombLinger       = time.Minute      // a removed record may linger this long in a records cache
	removeRetryEvery = 30 * time.Second // failed removals are retried this often at most
	removeRetryBatch = 16               // and this many at a time
)

// tomb is a top-level run that ended here. Until its record is removed,
// and a while after (a records cache lags its own deletes), the records'
// copy is never served, counted as adoptable or listed by this store.
type tomb struct {
	at      time.Time // when it ended, or when its record was removed
	removed bool      // its record is gone
}

// buryLocked hides id from the records; removed says its record is gone.
func (s *Store) buryLocked(id string, removed bool) {
	if len(s.tombs) >= maxTombs {
		s.pruneTombsLocked(s.now())
	}
	if len(s.tombs) >= maxTombs { // all pending: forget the oldest
		oldest := ""
		for tid, t := range s.tombs {
			if oldest == "" || t.at.Before(s.tombs[oldest].at) {
				oldest = tid
			}
		}
		delete(s.tombs, oldest)
	}
	s.tombs[id] = tomb{at: s.now(), removed: removed}
}

// pruneTombsLocked forgets removed records once their linger is over.
func (s *Store) pruneTombsLocked(now time.Time) {
	for id, t := range s.tombs {
		if t.removed && now.Sub(t.at) >= tombLinger {
			delete(s.tombs, id)
		}
	}
}

// hiddenLocked reports whether id ended here and its record is not to be
// served.
func (s *Store) hiddenLocked(id string, now time.Time) bool {
	t, ok := s.tombs[id]
	return ok && (!t.removed || now.Sub(t.at) < tombLinger)
}

// removeRecord removes the record of an ended run, outside the lock. A
// removal that fails (ctx ended, the records are down) is retried later;
// until then the record is hidden here.
func (s *Store) removeRecord(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, s.recTimeout)
	err := s.records.Remove(ctx, id)
	cancel()
	s.mu.Lock()
	if _, ok := s.tombs[id]; ok && err == nil {
		s.tombs[id] = tomb{at: s.now(), removed: true}
	}
	s.mu.Unlock()
	if err != nil && s.onRecordErr != nil {
		s.onRecordErr(fmt.Errorf("the record of the ended run %s cannot be removed (this replica no longer serves the run; the removal is retried): %w", id, err))
	}
}

// maybeRetry starts a retry of failed removals when one is due.
func (s *Store) maybeRetry() {
	if s.records == nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	var ids []string
	if !s.retrying && now.Sub(s.lastRetry) >= removeRetryEvery {
		for id, t := range s.tombs {
			if !t.removed && now.Sub(t.at) >= removeRetryEvery {
				ids = append(ids, id)
				if len(ids) == removeRetryBatch {
					break
				}
			}
		}
	}
	if len(ids) > 0 {
		s.retrying, s.lastRetry = true, now
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	go func() {
		for _, id := range ids {
			s.removeRecord(context.Background(), id)
		}
		s.mu.Lock()
		s.retrying = false
		s.mu.Unlock()
	}()
}

// putRecord writes a new top-level run into the records and then into
// memory. A failed write may still have landed (a timeout), so its record
// is removed, or hidden and retried, lest it count against the tenant. No
// one was given the run's id, so when the caller has gone the removal is
// left to the retry rather than kept waiting for.
func (s *Store) putRecord(ctx context.Context, run tools.Run) error {
	ctx, cancel := context.WithTimeout(ctx, s.recTimeout)
	err := s.records.Put(ctx, run)
	cancel()
	s.mu.Lock()
	if s.reserved[run.Tenant]--; s.reserved[run.Tenant] <= 0 {
		delete(s.reserved, run.Tenant)
	}
	if err == nil {
		s.insertLocked(run, s.now())
	} else {
		s.buryLocked(run.ID, false)
	}
	s.mu.Unlock()
	if err != nil {
		s.removeRecord(ctx, run.ID)
		return errdefs.Unavailable("the run cannot be stored where every replica sees it (%v); nothing was created, retry in a moment", err)
	}
	return nil
}

// checkRecord returns run, a top-level run in memory, unless its record
// is gone: then another replica deleted it and it ends here as well. When
// the records cannot respond, memory serves.
func (s *Store) checkRecord(ctx context.Context, run tools.Run) (tools.Run, error) {
	ctx, cancel := context.WithTimeout(ctx, s.recTimeout)
	_, ok, err := s.records.Get(ctx, run.ID)
	cancel()
	if err != nil || ok {
		return run, nil
	}
	s.mu.Lock()
	var gone []ended
	if e := s.runs[run.ID]; e != nil && e.run.Tenant == run.Tenant {
		gone = s.removeLocked(run.ID, "deleted", nil)
		s.buryLocked(run.ID, true)
	}
	s.mu.Unlock()
	s.finish(ctx, gone)
	return tools.Run{}, NoRun(run.ID)
}

// adopt finds the tenant's top-level run id in the records and keeps it in
// memory, as fresh as a run just used.
func (s *Store) adopt(ctx context.Context, tenant, id string) (tools.Run, error) {
	rec, err := s.lookupRecord(ctx, id)
	if err != nil {
		return tools.Run{}, errdefs.Unavailable("run %q cannot be looked up where every replica sees runs (%v); retry in a moment", id, err)
	}
	if rec.ID != id || rec.Tenant != tenant || rec.Parent != "" {
		return tools.Run{}, NoRun(id)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hiddenLocked(id, now) {
		return tools.Run{}, NoRun(id) // it ended here while being looked up
	}
	if e := s.runs[id]; e != nil {
		e.lastUsed = now
		return e.run, nil
	}
	s.insertLocked(rec, now)
	return rec, nil
}

// lookupRecord reads id from the records unless it ended here; a run that
// is not there is the zero Run.
func (s *Store) lookupRecord(ctx context.Context, id string) (tools.Run, error) {
	s.mu.Lock()
	hidden := s.hiddenLocked(id, s.now())
	s.mu.Unlock()
	if hidden {
		return tools.Run{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.recTimeout)
	defer cancel()
	rec, ok, err := s.records.Get(ctx, id)
	if err != nil || !ok {
		return tools.Run{}, err
	}
	return rec, nil
}

// AdoptConversation keeps in memory every recorded run of the tenant's
// conversation that is not there yet, each as fresh as a run just used,
// and returns how many: this replica has taken the conversation over. It
// does nothing without records or once ctx is done.
func (s *Store) AdoptConversation(ctx context.Context, tenant, conversation string) int {
	if s.records == nil || ctx.Err() != nil {
		return 0
	}
	recs := s.records.List(tenant)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range recs {
		if r.ID == "" || r.Tenant != tenant || r.Conversation != conversation || r.Parent != "" ||
			s.runs[r.ID] != nil || s.hiddenLocked(r.ID, now) {
			continue
		}
		s.insertLocked(r, now)
		n++
	}
	return n
}

// ForgetConversation drops the tenant's conversation's runs, and the runs
// they spawned, from memory only: another replica has taken the
// conversation over and serves them from now on. No run ends (the end
// hook is not called) and no record is removed.
func (s *Store) ForgetConversation(tenant, conversation string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.runs {
		if _, still := s.runs[id]; still && e.run.Tenant == tenant && e.run.Conversation == conversation {
			s.removeLocked(id, "", nil)
		}
	}
	s.flushLocked()
}
