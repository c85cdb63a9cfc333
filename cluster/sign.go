package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Headers of a forwarded request.
const (
	HeaderForwardedBy = "X-Sandboxd-Forwarded-By"
	HeaderForwardTime = "X-Sandboxd-Forward-Time"
	HeaderForwardTo   = "X-Sandboxd-Forward-Target"
	HeaderForwardSig  = "X-Sandboxd-Forward-Sig"
)

// forwardWindow is how old a forwarded request may be (and how far the
// sender's clock may be off ours) before it is refused as stale.
const forwardWindow = 30 * time.Second

// MinPeerKey is the shortest peer secret accepted.
const MinPeerKey = 32

// Signer signs and checks forwarded requests with the replicas' shared
// key. A signature covers the method, the request URI, the sender, the
// replica it is meant for and the time, so it cannot be replayed at
// another replica, for another path, or after the window.
type Signer struct {
	key  []byte
	self string
	now  func() time.Time
}

// NewSigner returns a Signer for replica self.
func NewSigner(key []byte, self string) (*Signer, error) {
	if len(key) < MinPeerKey {
		return nil, fmt.Errorf("the peer secret has %d bytes; use at least %d random bytes", len(key), MinPeerKey)
	}
	return &Signer{key: key, self: self, now: time.Now}, nil
}

func (s *Signer) mac(method, uri, by, to, ts string) string {
	m := hmac.New(sha256.New, s.key)
	for _, p := range []string{method, uri, by, to, ts} {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Sign marks r as forwarded by this replica to target.
func (s *Signer) Sign(r *http.Request, target string) {
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	r.Header.Set(HeaderForwardedBy, s.self)
	r.Header.Set(HeaderForwardTo, target)
	r.Header.Set(HeaderForwardTime, ts)
	r.Header.Set(HeaderForwardSig, s.mac(r.Method, r.URL.RequestURI(), s.self, target, ts))
}

// errForged is a forwarded request this replica must not serve.
var errForged = errors.New("forged or stale")

// Verify reports whether r claims to be forwarded and, if so, whether
// the claim holds: signed with the key, meant for this replica, recent.
func (s *Signer) Verify(r *http.Request) (forwarded bool, err error) {
	sig := r.Header.Get(HeaderForwardSig)
	by, to, ts := r.Header.Get(HeaderForwardedBy), r.Header.Get(HeaderForwardTo), r.Header.Get(HeaderForwardTime)
	if sig == "" && by == "" && to == "" && ts == "" {
		return false, nil
	}
	want := s.mac(r.Method, r.URL.RequestURI(), by, to, ts)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return true, fmt.Errorf("%w: its signature does not match", errForged)
	}
	if to != s.self {
		return true, fmt.Errorf("%w: it is meant for replica %q, not this one (%q)", errForged, to, s.self)
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return true, fmt.Errorf("%w: its time %q is not a number", errForged, ts)
	}
	if d := s.now().Sub(time.UnixMilli(ms)); d > forwardWindow || d < -forwardWindow {
		return true, fmt.Errorf("%w: it was signed %s from now, outside the %s window", errForged, d.Round(time.Second), forwardWindow)
	}
	return true, nil
}
