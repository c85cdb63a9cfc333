package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// session is one MCP session: made by initialize, named by the
// Mcp-Session-Id header, bound to one run of one tenant.
type session struct {
	id      string
	tenant  string
	run     string
	version string // the negotiated protocol revision

	// guarded by the table's mu:
	lastUsed time.Time
	calls    map[string]context.CancelFunc // tool calls under way, by request id
}

// sessionTable holds the live sessions, at most maxPerRun per run and max
// in all; a session unused for ttl expires. Expiry is checked on access and
// swept when a session is made (no goroutine).
type sessionTable struct {
	ttl       time.Duration
	maxPerRun int
	max       int
	now       func() time.Time

	mu    sync.Mutex                     // guards byID, byRun and every session's lastUsed and calls
	byID  map[string]*session            // by session id
	byRun map[string]map[string]*session // run id -> session id -> session
}

func newSessionTable(ttl time.Duration, maxPerRun, max int, now func() time.Time) *sessionTable {
	return &sessionTable{ttl: ttl, maxPerRun: maxPerRun, max: max, now: now,
		byID: map[string]*session{}, byRun: map[string]map[string]*session{}}
}

// create makes a session for the tenant's run. A run at its cap loses its
// least recently used session (only that run's own client is affected); a
// table full of other runs' sessions refuses.
func (t *sessionTable) create(tenant, run, version string) (*session, error) {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, errdefs.Internal("no random bytes for an MCP session id: %v", err)
	}
	s := &session{id: base64.RawURLEncoding.EncodeToString(b[:]), tenant: tenant, run: run, version: version, calls: map[string]context.CancelFunc{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	s.lastUsed = now
	t.sweepLocked(now)
	if of := t.byRun[run]; len(of) >= t.maxPerRun {
		// The least recently used, one with no call under way if there is.
		var oldest *session
		for _, o := range of {
			busy, oldBusy := len(o.calls) > 0, oldest != nil && len(oldest.calls) > 0
			if oldest == nil || oldBusy && !busy || busy == oldBusy && o.lastUsed.Before(oldest.lastUsed) {
				oldest = o
			}
		}
		t.removeLocked(oldest)
	}
	if len(t.byID) >= t.max {
		return nil, errdefs.ResourceExhausted("sandboxd holds %d MCP sessions, its cap; end unused ones with DELETE (or let them expire after %s unused) and initialize again", t.max, t.ttl)
	}
	t.byID[s.id] = s
	if t.byRun[run] == nil {
		t.byRun[run] = map[string]*session{}
	}
	t.byRun[run][s.id] = s
	return s, nil
}

// get returns the live session id of the tenant's run and marks it used;
// a session of another run or tenant is not found, as if it did not exist.
func (t *sessionTable) get(id, tenant, run string) (*session, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byID[id]
	if s == nil || s.tenant != tenant || s.run != run {
		return nil, false
	}
	now := t.now()
	if t.expiredLocked(s, now) {
		t.removeLocked(s)
		return nil, false
	}
	s.lastUsed = now
	return s, true
}

// remove ends one session, cancelling its calls under way.
func (t *sessionTable) remove(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(s)
}

// dropRun ends every session of run.
func (t *sessionTable) dropRun(run string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.byRun[run] {
		t.removeLocked(s)
	}
}

// len is the number of sessions held, expired ones included.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// track registers a call under way so notifications/cancelled and the
// session's end can stop it; the returned func forgets it. A session that
// already ended cancels the call at once.
func (t *sessionTable) track(s *session, reqID string, cancel context.CancelFunc) (untrack func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[s.id] != s {
		cancel()
		return func() {}
	}
	s.calls[reqID] = cancel
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(s.calls, reqID)
		s.lastUsed = t.now() // the TTL counts from the call's end
	}
}

// cancel stops the session's call reqID, if it is under way.
func (t *sessionTable) cancel(s *session, reqID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := s.calls[reqID]; c != nil {
		c()
	}
}

func (t *sessionTable) sweepLocked(now time.Time) {
	for _, s := range t.byID {
		if t.expiredLocked(s, now) {
			t.removeLocked(s)
		}
	}
}

// expiredLocked reports whether s has gone unused for the TTL. A session
// with a call under way (a long command, a wait for a human's approval) is
// in use until the call ends.
func (t *sessionTable) expiredLocked(s *session, now time.Time) bool {
	return len(s.calls) == 0 && now.Sub(s.lastUsed) >= t.ttl
}

func (t *sessionTable) removeLocked(s *session) {
	if t.byID[s.id] != s {
		return
	}
	delete(t.byID, s.id)
	if of := t.byRun[s.run]; of != nil {
		delete(of, s.id)
		if len(of) == 0 {
			delete(t.byRun, s.run)
		}
	}
	for _, c := range s.calls {
		c()
	}
	s.calls = map[string]context.CancelFunc{}
}
