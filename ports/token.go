package ports

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Claims is what a preview token says: which sandbox's port it shows, to
// whom it belongs, and until when.
type Claims struct {
	ID      string `json:"i"` // the preview's id: "pv" and 16 lower-case letters or digits
	Tenant  string `json:"t"`
	Sandbox string `json:"s"`
	Port    int    `json:"p"`
	Expires int64  `json:"e"` // Unix seconds
}

// ExpiresAt is the expiry as a time.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0).UTC() }

// tokenPrefix marks the token format, so a later format can be told apart.
const tokenPrefix = "p1."

// maxToken caps the token a request may carry: a longer one is not
// decoded at all.
const maxToken = 1024

// signer makes and checks tokens with an HMAC key.
type signer struct{ key []byte }

// newSigner derives the token key from secret, so the secret (the
// replicas' peer key) signs nothing else with the same bytes.
func newSigner(secret []byte) signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sandboxd preview links v1"))
	return signer{key: m.Sum(nil)}
}

func (s signer) mac(payload string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sign returns c's token.
func (s signer) sign(c Claims) string {
	b, _ := json.Marshal(c) // Claims always marshals
	payload := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + s.mac(payload)
}

// Errors of a token that does not hold.
var (
	errBadToken = errors.New("this preview link is not one sandboxd issued (it is cut short, altered, or from another deployment); ask for a new link")
)

// verify checks tok's signature and returns its claims; the expiry and
// revocation are checked by the caller.
func (s signer) verify(tok string) (Claims, error) {
	i := strings.LastIndexByte(tok, '.')
	if len(tok) > maxToken || i < 0 || !strings.HasPrefix(tok, tokenPrefix) {
		return Claims{}, errBadToken
	}
	payload, sig := tok[:i], tok[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
		return Claims{}, errBadToken
	}
	return decode(payload)
}

// Peek reads the claims of tok without checking its signature: enough to
// route a request to the replica that owns the sandbox, which checks it.
func Peek(tok string) (Claims, bool) {
	i := strings.LastIndexByte(tok, '.')
	if len(tok) > maxToken || i < 0 || !strings.HasPrefix(tok, tokenPrefix) {
		return Claims{}, false
	}
	c, err := decode(tok[:i])
	return c, err == nil
}

func decode(payload string) (Claims, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(payload, tokenPrefix))
	if err != nil {
		return Claims{}, errBadToken
	}
	var c Claims
	if json.Unmarshal(b, &c) != nil || c.ID == "" || c.Sandbox == "" || c.Port < 1 || c.Port > 65535 {
		return Claims{}, errBadToken
	}
	return c, nil
}

// idEncoding writes preview ids in lower case, so they fit a host name.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID is a fresh preview id: "pv" and 16 characters (80 random bits).
func newID() string {
	var b [10]byte
	rand.Read(b[:])
	return "pv" + idEncoding.EncodeToString(b[:])
}

// validID reports whether id has the shape newID gives.
func validID(id string) bool {
	if len(id) != 18 || !strings.HasPrefix(id, "pv") {
		return false
	}
	for _, c := range id[2:] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
