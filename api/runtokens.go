package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"

	"github.com/sandboxd/sandboxd/errdefs"
)

// RunTokens issues bearer tokens that are each valid for ONE run: a worker
// gets one for its child run, so it can list and call that run's tools and
// nothing else (no other run, no sandbox, no question). Only SHA-256 hashes
// are kept. It is safe for concurrent use.
type RunTokens struct {
	mu     sync.Mutex // guards byHash and byRun
	byHash map[[sha256.Size]byte]runScope
	byRun  map[string][sha256.Size]byte
}

type runScope struct{ tenant, run string }

// NewRunTokens returns an empty token set.
func NewRunTokens() *RunTokens {
	return &RunTokens{byHash: map[[sha256.Size]byte]runScope{}, byRun: map[string][sha256.Size]byte{}}
}

// Issue makes a token for the tenant's run, replacing any earlier one.
func (t *RunTokens) Issue(tenant, run string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", errdefs.Internal("no random bytes for a run token: %v", err)
	}
	tok := "sbxr_" + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(tok))
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byRun[run]; ok {
		delete(t.byHash, old)
	}
	t.byHash[h] = runScope{tenant, run}
	t.byRun[run] = h
	return tok, nil
}

// Revoke ends the run's token (the run ended or its worker stopped).
func (t *RunTokens) Revoke(run string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.byRun[run]; ok {
		delete(t.byHash, h)
		delete(t.byRun, run)
	}
}

// lookup returns the run a token is scoped to.
func (t *RunTokens) lookup(token string) (runScope, bool) {
	h := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	sc, ok := t.byHash[h]
	return sc, ok
}

// WithRunTokens accepts tokens from rt on the run tool endpoints of their
// own run only.
func WithRunTokens(rt *RunTokens) Option { return func(s *Server) { s.runTokens = rt } }
