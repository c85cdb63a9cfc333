package envd

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Accounts. E2B runs every command and file operation as an account of the
// sandbox: the one a request names (the SDK's user option: HTTP Basic
// authentication on calls, the username parameter on /files), else the
// template's default, "user". Relative paths are taken from that account's
// home. sandboxd does the same with the accounts of the sandbox's
// /etc/passwd; an image without the default account runs as root.

// DefaultUser is E2B's default account.
const DefaultUser = "user"

// account is one entry of a sandbox's /etc/passwd.
type account struct {
	name string
	uid  string
	home string
}

// root is the account of a sandbox whose /etc/passwd cannot be read.
var root = account{name: "root", uid: "0", home: "/root"}

// agentUser is what the agent is told to run as: "" for uid 0, which
// keeps the agent's own credentials (root's), else the uid.
func (a account) agentUser() string {
	if a.uid == "0" {
		return ""
	}
	return a.uid
}

// maxPasswd caps the /etc/passwd read to find an account.
const maxPasswd = 1 << 20

// maxAccounts caps the accounts kept per service (sandbox and name); the
// cache starts over when full.
const maxAccounts = 4096

// requestUser is the account r names: Basic authentication's user (RPC
// calls), or the username parameter (/files); "" when it names none.
func requestUser(r *http.Request) string {
	if u := r.URL.Query().Get("username"); u != "" {
		return u
	}
	auth := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return ""
	}
	user, _, _ := strings.Cut(string(raw), ":")
	return user
}

// errNoAccount is E2B's answer for an account the sandbox does not have.
func errNoAccount(name string) *rpcError {
	return rpcErr(codeUnauthenticated, "invalid user: '%s' has no account in the sandbox; name one of its /etc/passwd, or none for the default (%s)", name, DefaultUser)
}

// accountFor finds the account a request acts as in the sandbox of t:
// named, it must exist; unnamed, the default account, or root where the
// sandbox has none.
func (s *Service) accountFor(ctx context.Context, t target, named string) (account, error) {
	name := named
	if name == "" {
		name = s.o.DefaultUser
	}
	key := t.info.ID + "\x00" + name
	now := time.Now()
	s.mu.Lock()
	c, ok := s.accounts[key]
	s.mu.Unlock()
	if ok && (c.until.IsZero() || now.Before(c.until)) {
		return c.account, nil
	}
	f, err := t.c.ReadFile(ctx, &proto.ReadFileRequest{Root: "/", Path: s.o.Passwd, MaxBytes: maxPasswd})
	var found bool
	if err == nil {
		c.account, found = lookupPasswd(f.Data, name)
	}
	switch {
	case !found && named != "":
		return account{}, errNoAccount(named)
	case !found:
		// Root for now; the account may be added later, so looked for
		// again a little later.
		c = cachedAccount{account: root, until: now.Add(fallbackFor)}
	default:
		c.until = time.Time{}
	}
	s.mu.Lock()
	if len(s.accounts) >= maxAccounts {
		s.accounts = map[string]cachedAccount{}
	}
	s.accounts[key] = c
	s.mu.Unlock()
	return c.account, nil
}

// cachedAccount is an account found for a sandbox and name; until is when
// a fallback to root is looked at again (zero: an account found, kept).
type cachedAccount struct {
	account
	until time.Time
}

// fallbackFor is how long a sandbox without the default account runs
// requests as root before its /etc/passwd is read again.
const fallbackFor = 10 * time.Second

// LookupHome is the home directory of account name (or a numeric uid) in
// the text of a sandbox's /etc/passwd; ok is false when it has none.
func LookupHome(passwd []byte, name string) (home string, ok bool) {
	a, ok := lookupPasswd(passwd, name)
	return a.home, ok
}

// lookupPasswd finds name (or a numeric uid) in the text of /etc/passwd.
func lookupPasswd(passwd []byte, name string) (account, bool) {
	for line := range bytes.Lines(passwd) {
		f := strings.Split(strings.TrimRight(string(line), "\r\n"), ":")
		if len(f) < 7 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] == name || f[2] == name {
			home := f[5]
			if !path.IsAbs(home) {
				home = "/"
			}
			return account{name: f[0], uid: f[2], home: path.Clean(home)}, true
		}
	}
	return account{}, false
}

// abs makes p absolute in the sandbox: a relative path (and ~) is taken
// from the account's home, as E2B does.
func (a account) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	}
	return path.Join(a.home, p)
}
