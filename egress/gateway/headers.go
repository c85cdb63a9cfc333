package gateway

import (
	"strings"

	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A sandbox's own headers (sandbox.EgressSpec.Headers, E2B's network
// rules) are sent the way a tenant's secrets are: on the requests to their
// hosts, added by the proxy on the way out (HTTPS opened with sandboxd's
// certificate authority), with a value that is the sandbox's rather than
// read from the operator's files.

// Caps on a sandbox's own headers, refused with a sentence past them.
const (
	maxHeaders     = 64
	maxHeaderValue = 8 << 10
)

// headerPrefix starts the name a sandbox's own header goes by in the
// decisions' secrets.
const headerPrefix = "header:"

// headerSecrets checks a sandbox's own headers and makes them secrets.
func headerSecrets(hs []sandbox.EgressHeader) ([]egress.Secret, error) {
	if len(hs) > maxHeaders {
		return nil, errdefs.InvalidArgument("the sandbox sets %d headers on its requests, over the %d it may; set fewer", len(hs), maxHeaders)
	}
	out := make([]egress.Secret, 0, len(hs))
	for _, h := range hs {
		r, err := egress.ParseRule(h.Host)
		switch {
		case err != nil:
			return nil, errdefs.InvalidArgument("the host of header %s: %v", h.Name, err)
		case r.IsCIDR():
			return nil, errdefs.InvalidArgument("header %s is for %q, an address range; headers are added for named hosts only (their certificate is checked by name), so give a host name", h.Name, h.Host)
		case !headerName.MatchString(h.Name):
			return nil, errdefs.InvalidArgument("%q is not a header name; give one such as X-Api-Key", h.Name)
		case h.Value == "":
			return nil, errdefs.InvalidArgument("header %s for %s has an empty value; give the value to send", h.Name, h.Host)
		case len(h.Value) > maxHeaderValue:
			return nil, errdefs.InvalidArgument("the value of header %s for %s is over %d KiB; send a shorter one", h.Name, h.Host, maxHeaderValue>>10)
		case strings.ContainsAny(h.Value, "\r\n\x00"):
			return nil, errdefs.InvalidArgument("the value of header %s for %s holds a line break or NUL; a header value is one line", h.Name, h.Host)
		}
		v := h.Value
		out = append(out, egress.Secret{Name: headerNames([]sandbox.EgressHeader{h})[0], Hosts: []egress.Rule{r}, Header: h.Name, Format: "{}",
			Value: func() (string, error) { return v, nil }})
	}
	return out, nil
}

// named is the tenant's secrets the box may use; the caller holds g.mu or
// owns the box alone.
func (b *box) named() []egress.Secret {
	out := make([]egress.Secret, 0, len(b.secrets))
	for _, name := range b.secrets {
		if s, ok := b.tenant.secrets[name]; ok {
			out = append(out, s)
		}
	}
	return out
}

// headerNames are the names a sandbox's own headers go by in its status
// and decisions.
func headerNames(hs []sandbox.EgressHeader) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = headerPrefix + h.Name + "@" + h.Host
	}
	return out
}
