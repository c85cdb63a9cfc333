package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Authenticator maps a bearer token to its tenant.
type Authenticator interface {
	Authenticate(token string) (tenant string, ok bool)
}

// TenantToken is a tenant and the SHA-256 of its token.
type TenantToken struct {
	Tenant string
	SHA256 [sha256.Size]byte
}

// ParseTenantToken reads a hex SHA-256 (as in the config file).
func ParseTenantToken(tenant, hexHash string) (TenantToken, error) {
	b, err := hex.DecodeString(strings.ToLower(hexHash))
	if err != nil || len(b) != sha256.Size {
		return TenantToken{}, fmt.Errorf("tenant %s: token_sha256 must be 64 hex digits", tenant)
	}
	t := TenantToken{Tenant: tenant}
	copy(t.SHA256[:], b)
	return t, nil
}

// HashToken returns the hex SHA-256 of token, the form the config stores.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// TokenAuth compares SHA-256 hashes of tokens in constant time. Only hashes
// are held, so a memory dump or a config file does not reveal a token.
type TokenAuth struct {
	tokens []TenantToken
}

var _ Authenticator = (*TokenAuth)(nil)

// NewTokenAuth returns an Authenticator for tokens.
func NewTokenAuth(tokens ...TenantToken) *TokenAuth {
	return &TokenAuth{tokens: append([]TenantToken(nil), tokens...)}
}

// Authenticate compares against every entry without stopping early, so the
// time taken does not say which entry (if any) matched.
func (a *TokenAuth) Authenticate(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(token))
	tenant := ""
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(h[:], t.SHA256[:]) == 1 {
			tenant = t.Tenant
		}
	}
	return tenant, tenant != ""
}

// TokenFileName is the admin token's file inside the data dir.
const TokenFileName = "token"

// LoadOrCreateAdminToken returns the admin token stored in dataDir, making
// one (mode 0600) on the first start. created says whether it is new. A
// token that cannot be written whole (a full or read-only disk) is an
// error, and nothing is left at the token's path.
func LoadOrCreateAdminToken(dataDir string) (token, path string, created bool, err error) {
	return loadOrCreateAdminToken(dataDir, newTokenTemp)
}

// tokenTemp is the temporary file a new token is written to before it is
// linked into place.
type tokenTemp interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// newTokenTemp creates the temporary file in dir; os.CreateTemp makes it
// mode 0600, readable by this user only.
func newTokenTemp(dir string) (tokenTemp, error) {
	return os.CreateTemp(dir, ".token-*")
}

func loadOrCreateAdminToken(dataDir string, newTemp func(dir string) (tokenTemp, error)) (token, path string, created bool, err error) {
	path = filepath.Join(dataDir, TokenFileName)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", path, false, fmt.Errorf("data dir %s cannot be created: %w", dataDir, err)
	}
	if tok, err := readTokenFile(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, path, false, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", path, false, fmt.Errorf("no random bytes for the admin token: %w", err)
	}
	tok := "sbx_" + base64.RawURLEncoding.EncodeToString(b[:])
	// Write a temporary file and link it into place: a reader never sees a
	// half-written token, and of two starts racing, one token wins (a
	// rename would replace the token the other start already handed out).
	tmp, err := newTemp(dataDir)
	if err != nil {
		return "", path, false, fmt.Errorf("the admin token cannot be written in the data dir %s: %w; make the directory writable or choose another with --data-dir", dataDir, err)
	}
	defer os.Remove(tmp.Name()) // the link, if any, keeps the token
	_, err = tmp.Write([]byte(tok + "\n"))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", path, false, fmt.Errorf("the admin token cannot be written to %s: %w; free space on the disk of the data dir (or make it writable) and start sandboxd again", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			tok, err := readTokenFile(path)
			return tok, path, false, err
		}
		return "", path, false, fmt.Errorf("the admin token cannot be put at %s: %w", path, err)
	}
	// The link is an entry of the directory: sync it too, so a crash does
	// not lose the token after it was shown.
	if err := syncDir(dataDir); err != nil {
		return "", path, false, fmt.Errorf("the data dir %s cannot be synced after the admin token was put there: %w; check the disk, then start sandboxd again (it reads the token from %s)", dataDir, err, path)
	}
	return tok, path, true, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func readTokenFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		// Others could read it; close that before using it.
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("token file %s is readable by others and cannot be restricted: %w; run chmod 600 on it", path, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file %s cannot be read: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s does not hold one token; delete it and start sandboxd again to make a new one", path)
	}
	return tok, nil
}
