package e2b

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// What E2B knows of a sandbox and sandboxd does not — its template, its
// metadata, its timeout — is kept per sandbox in the data dir
// (e2b/sandboxes.json), under the sandbox's own id, which is also its E2B
// id: a restarted sandboxd answers for every sandbox as before.

// record is one sandbox's E2B state.
type record struct {
	Tenant    string            `json:"tenant"`
	Template  string            `json:"template"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	EndAt     time.Time         `json:"end_at,omitzero"` // the timeout; zero while paused by it
	AutoPause bool              `json:"auto_pause,omitempty"`
	// KeepMemory false makes the timeout's pause a hibernation.
	KeepMemory bool      `json:"keep_memory,omitempty"`
	Created    time.Time `json:"created"`
}

// store is the records, kept whole in one file.
type store struct {
	path string

	mu   sync.Mutex
	recs map[string]record
}

func openStore(dir string) (*store, error) {
	s := &store{path: filepath.Join(dir, "sandboxes.json"), recs: map[string]record{}}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("the E2B records %s cannot be read: %w", s.path, err)
	}
	if err := json.Unmarshal(b, &s.recs); err != nil {
		return nil, fmt.Errorf("the E2B records %s are not valid JSON (%v); move the file away to start without them", s.path, err)
	}
	if s.recs == nil {
		s.recs = map[string]record{}
	}
	return s, nil
}

func (s *store) get(id string) (record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[id]
	return r, ok
}

// update changes id's record with f (given the zero record when there is
// none) and saves; f returning false leaves it as it was.
func (s *store) update(id string, f func(r *record) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if !f(&r) {
		return nil
	}
	s.recs[id] = r
	return s.saveLocked()
}

func (s *store) remove(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[id]; !ok {
		return nil
	}
	delete(s.recs, id)
	return s.saveLocked()
}

// due lists the sandboxes whose timeout has passed at now.
func (s *store) due(now time.Time) map[string]record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]record{}
	for id, r := range s.recs {
		if !r.EndAt.IsZero() && !now.Before(r.EndAt) {
			out[id] = r
		}
	}
	return out
}

func (s *store) saveLocked() error {
	b, err := json.Marshal(s.recs)
	if err != nil {
		return err
	}
	return writeFile(s.path, b)
}

// writeFile replaces path with data whole (a crash leaves the old or the new).
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// The envd access token names a tenant and a sandbox, signed with a key
// kept in the data dir (e2b/access.key): requests to the sandbox URL carry
// only it, and sandboxd checks it on each.

const tokenPrefix = "e2b1."

type signer struct{ key []byte }

func loadSigner(dir string) (signer, error) {
	path := filepath.Join(dir, "access.key")
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return newSigner(b), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return signer{}, fmt.Errorf("the E2B access key %s cannot be read: %w", path, err)
	}
	b = make([]byte, 32)
	rand.Read(b)
	if err := writeFile(path, b); err != nil {
		return signer{}, fmt.Errorf("the E2B access key %s cannot be written: %w", path, err)
	}
	return newSigner(b), nil
}

// newSigner derives the token key from secret, so the secret signs
// nothing else with the same bytes.
func newSigner(secret []byte) signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sandboxd e2b access tokens v1"))
	return signer{key: m.Sum(nil)}
}

func (s signer) mac(payload string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// token is the access token of the tenant's sandbox id.
func (s signer) token(tenant, id string) string {
	payload := tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(tenant+"\x00"+id))
	return payload + "." + s.mac(payload)
}

// verify returns the tenant and sandbox tok names, when sandboxd signed it.
func (s signer) verify(tok string) (tenant, id string, ok bool) {
	i := strings.LastIndexByte(tok, '.')
	if len(tok) > 1024 || i < 0 || !strings.HasPrefix(tok, tokenPrefix) {
		return "", "", false
	}
	payload, sig := tok[:i], tok[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(payload, tokenPrefix))
	if err != nil {
		return "", "", false
	}
	tenant, id, ok = strings.Cut(string(b), "\x00")
	return tenant, id, ok
}
