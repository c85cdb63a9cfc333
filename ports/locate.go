package ports

import (
	"net"
	"net/http"
	"strconv"
	"strings"
)

// How a request names its preview.
const (
	// PathPrefix starts a path-based preview: /p/{token}/{path...}.
	PathPrefix = "/p/"
	// CookieName carries a host-based preview's token after the first
	// visit; the first visit carries it in the query parameter of the same
	// name, which is taken off by a redirect.
	CookieName = "sandboxd_preview"
)

// Located is a request for a preview, as its URL or host names it.
type Located struct {
	Token string
	// Path is what the app in the sandbox is asked for: the request's
	// path without /p/{token} (path-based), or as it is (host-based).
	Path string
	// Host is true for a host-based preview, and then HostPort and HostID
	// are the {port}-{id} the host name starts with.
	Host     bool
	HostPort int
	HostID   string
	// FromQuery says the token came in the query (a host-based first visit).
	FromQuery bool
}

// Locate reads the preview a request is for: a host name under domain
// (when domain is set), or a path under PathPrefix. ok is false for any
// other request, which is not a preview's.
func Locate(r *http.Request, domain string) (Located, bool) {
	if domain != "" {
		if port, id, ok := previewHost(r.Host, domain); ok {
			l := Located{Host: true, HostPort: port, HostID: id, Path: r.URL.Path}
			if tok := r.URL.Query().Get(CookieName); tok != "" {
				l.Token, l.FromQuery = tok, true
			} else if c, err := r.Cookie(CookieName); err == nil {
				l.Token = c.Value
			}
			return l, true
		}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		return Located{}, false
	}
	tok, path, _ := strings.Cut(rest, "/")
	if tok == "" {
		return Located{}, false
	}
	return Located{Token: tok, Path: "/" + path}, true
}

// SandboxOf is the sandbox a preview request is for, read from its token
// without checking it (the replica that owns the sandbox does): what a
// replica's router needs to send it there.
func SandboxOf(r *http.Request, domain string) (Claims, bool) {
	l, ok := Locate(r, domain)
	if !ok || l.Token == "" {
		return Claims{}, false
	}
	return Peek(l.Token)
}

// previewHost splits "{port}-{id}.{domain}[:port]".
func previewHost(host, domain string) (port int, id string, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+domain)
	if !ok || strings.Contains(label, ".") {
		return 0, "", false
	}
	ps, id, ok := strings.Cut(label, "-")
	if !ok {
		return 0, "", false
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || !validID(id) {
		return 0, "", false
	}
	return port, id, true
}

// HostLabel is the first label of a host-based preview's host name.
func HostLabel(c Claims) string { return strconv.Itoa(c.Port) + "-" + c.ID }
