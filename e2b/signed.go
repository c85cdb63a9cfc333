package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Signed file URLs. The SDK of a secure sandbox signs the /files URLs it
// hands out (downloadUrl, uploadUrl) with the sandbox's access token, so
// that a client without the token (a browser, curl) can use them. It builds
// them at the root of the sandbox URL's host — new URL("/files", url) drops
// the path of E2B_SANDBOX_URL — so such a URL names no sandbox unless its
// host does ({port}-{id}.{domain}); the signature then says whose it is, and
// is checked against the token of every sandbox.

// signedPath is where the SDK puts signed file URLs when its sandbox URL is
// a path of sandboxd's listener.
const signedPath = "/files"

// signatureVersion starts every signature the SDK makes.
const signatureVersion = "v1_"

// Error messages envd answers, which E2B's clients and tests compare.
const (
	msgSignatureExpired = "signature is already expired"
	msgSignatureInvalid = "invalid signature"
)

// signedRequest is what a signed file URL carries.
type signedRequest struct {
	path, op, user string
	signature      string
	expires        string // seconds since the epoch as sent, "" for none
}

// signedOf reads r's signature; ok is false when r carries none.
func signedOf(r *http.Request) (sr signedRequest, ok bool) {
	q := r.URL.Query()
	sr.signature = q.Get("signature")
	if sr.signature == "" {
		return sr, false
	}
	sr.path, sr.user, sr.expires = q.Get("path"), q.Get("username"), q.Get("signature_expiration")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		sr.op = "read"
	default:
		sr.op = "write"
	}
	return sr, true
}

// sign is the signature the SDK makes for sr with an access token:
// "v1_" and the unpadded base64 of SHA-256 over path:op:user:token, and
// :expiration when the URL expires.
func (sr signedRequest) sign(token string) string {
	raw := sr.path + ":" + sr.op + ":" + sr.user + ":" + token
	if sr.expires != "" {
		raw += ":" + sr.expires
	}
	sum := sha256.Sum256([]byte(raw))
	return signatureVersion + base64.RawStdEncoding.EncodeToString(sum[:])
}

// signedBy reports whether token made sr's signature.
func (sr signedRequest) signedBy(token string) bool {
	return subtle.ConstantTimeCompare([]byte(sr.sign(token)), []byte(sr.signature)) == 1
}

// expired reports whether sr's URL has expired at now; an expiration that
// is not a number is an error.
func (sr signedRequest) expired(now time.Time) (bool, error) {
	if sr.expires == "" {
		return false, nil
	}
	at, err := strconv.ParseInt(sr.expires, 10, 64)
	if err != nil {
		return false, errdefs.InvalidArgument("signature_expiration %q is not a time in seconds since 1970; use the URL the SDK made", sr.expires)
	}
	return now.Unix() > at, nil
}

// checkSigned verifies the signature of r for sandbox id of tenant; the
// error carries envd's words and the status to answer.
func (h *Handler) checkSigned(r *http.Request, tenant, id string) (status int, msg string, ok bool) {
	sr, has := signedOf(r)
	if !has {
		return http.StatusUnauthorized, "a request to sandbox " + id + " needs its access token in X-Access-Token, or a signed URL from the SDK's downloadUrl or uploadUrl", false
	}
	if !sr.signedBy(h.sign.token(tenant, id)) {
		return http.StatusUnauthorized, msgSignatureInvalid, false
	}
	switch exp, err := sr.expired(time.Now()); {
	case err != nil:
		return http.StatusBadRequest, err.Error(), false
	case exp:
		return http.StatusUnauthorized, msgSignatureExpired, false
	}
	return 0, "", true
}

// isSignedFiles reports whether r is a signed file URL at the root of the
// listener (the SDK's downloadUrl and uploadUrl with a path-based sandbox
// URL).
func isSignedFiles(r *http.Request) bool {
	return r.URL.Path == signedPath && strings.Contains(r.URL.RawQuery, "signature=") && r.URL.Query().Get("signature") != ""
}

// SignedSandbox finds the sandbox whose access token signed r, a signed
// file URL at the listener's root; ok is false for any other request and
// when no sandbox's token made the signature. A replica's router routes by
// it: every replica has the same key (Config.Secret), so each can tell.
func (h *Handler) SignedSandbox(ctx context.Context, r *http.Request) (sandbox.Info, bool) {
	if !isSignedFiles(r) {
		return sandbox.Info{}, false
	}
	sr, _ := signedOf(r)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The sandboxes known now first; a listing only when none signed it
	// (a sandbox made by another replica, or since the last listing).
	for _, fresh := range []bool{false, true} {
		var notBefore time.Time
		if fresh {
			notBefore = time.Now()
		}
		infos, err := h.cfg.Sandboxes.All(ctx, notBefore)
		if err != nil {
			h.log.Warn("e2b: the sandboxes cannot be listed to find a signed URL's", "err", err)
			return sandbox.Info{}, false
		}
		for _, info := range infos {
			if sr.signedBy(h.sign.token(info.Tenant, info.ID)) {
				return info, true
			}
		}
	}
	return sandbox.Info{}, false
}

// serveSignedFiles serves a signed file URL at the listener's root.
func (h *Handler) serveSignedFiles(w http.ResponseWriter, r *http.Request) {
	info, ok := h.SignedSandbox(r.Context(), r)
	if !ok {
		writeError(w, http.StatusUnauthorized, msgSignatureInvalid)
		return
	}
	h.serveSandbox(w, r, info.ID, EnvdPort, "", false)
}

// signedQuery drops the signature from a signed URL's query, so that what
// serves the file sees only its path and user.
func signedQuery(q url.Values) string {
	q.Del("signature")
	q.Del("signature_expiration")
	return q.Encode()
}
