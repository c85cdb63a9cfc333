package egress

import (
	"context"
	"fmt"
	"net/http"
)

// plainHTTP serves one plain-HTTP proxied request and reports whether the
// client connection may carry another. Every request is decided anew, and
// a kept upstream connection is reused only for the same host and port,
// after its address is decided again.
func (s *session) plainHTTP(ctx context.Context, req *http.Request, hh hostField, ups *upstreams) bool {
	d, finish := s.begin("http")
	defer finish()
	refuse := func(status int, reason, sentence string) bool {
		d.Reason = reason
		writeRefusal(s.c, status, sentence)
		return false
	}
	if req.URL.Host == "" {
		return refuse(http.StatusBadRequest, "the request names no host: the program sent it to the proxy as if to a server",
			fmt.Sprintf("sandboxd: this is an HTTP proxy and the request for %.200s names no host; point HTTP_PROXY at the proxy so that programs send absolute URLs such as http://example.com/path.", req.RequestURI))
	}
	if req.URL.Scheme != "http" {
		return refuse(http.StatusBadRequest, "the request's scheme is "+req.URL.Scheme+", not http",
			fmt.Sprintf("sandboxd: the proxy forwards only http:// URLs as plain requests, not %.20s://; for https:// set HTTPS_PROXY so the program opens a CONNECT tunnel.", req.URL.Scheme))
	}
	host, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		return refuse(http.StatusBadRequest, "bad URL host: "+err.Error(), fmt.Sprintf("sandboxd: the request's URL host %s; send a host name or IP address.", err))
	}
	d.Host, d.Port = host, port
	if hh.multiple {
		return refuse(http.StatusBadRequest, "the request has several Host headers", "sandboxd: the request has more than one Host header; send exactly one.")
	}
	if hh.present {
		hhost, hport, err := splitHostPort(hh.value, 80)
		if err != nil || hhost != host || hport != port {
			return refuse(http.StatusForbidden, fmt.Sprintf("the Host header %.100q is not the URL's host %s", hh.value, destLabel(host, port)),
				fmt.Sprintf("sandboxd: the request's Host header %.100q does not match its URL's host %s; send the same host in both.", hh.value, destLabel(host, port)))
		}
	}
	pol, secrets := s.g.state()
	v := pol.Host(host, port)
	d.Rule, d.Reason = v.Rule, v.Why
	if !v.Allowed {
		return refuse(http.StatusForbidden, v.Why, RefusalMessage(host, port, pol.Allowed()))
	}
	var inj *injection
	if matched := matchSecrets(secrets, host, port); len(matched) > 0 {
		if inj, err = render(matched); err != nil {
			return refuse(http.StatusBadGateway, err.Error(), fmt.Sprintf("sandboxd: %s; ask the operator to fix it.", err))
		}
		d.Secrets = inj.names
	}
	label := destLabel(host, port)
	for attempt := 0; ; attempt++ {
		u, reused, ref := s.upstreamFor(ctx, ups, pol, host, port)
		if ref != nil {
			d.Addr = ref.addr
			return refuse(ref.status, ref.reason, ref.sentence)
		}
		d.Addr, d.Rule = u.to.addrPort(), ruleOf(v, "")
		if !s.c.setDest(u.to, u.conn) {
			ups.close()
			d.Reason = s.c.cutReason()
			return false
		}
		req.Host = req.URL.Host
		req.RequestURI = ""
		o := s.exchange(req, u, clientSide{conn: s.c, br: s.br}, inj, label)
		if o.stale && reused && attempt == 0 && (req.Body == nil || req.Body == http.NoBody) {
			ups.close()
			s.c.clearDest()
			continue // the server closed the kept connection; once more on a new one
		}
		if o.stale {
			o.reason = "the upstream closed the connection without answering"
			writeRefusal(s.c, http.StatusBadGateway, fmt.Sprintf("sandboxd: the server at %s closed the connection without answering; retry.", label))
		}
		if !o.keepUp {
			ups.close()
			s.c.clearDest()
		}
		d.Allowed = true
		if o.reason != "" {
			d.Reason = o.reason
		}
		if cut := s.c.cutReason(); cut != "" {
			d.Allowed, d.Reason = false, cut
			return false
		}
		return o.keepClient
	}
}

// upstreamFor returns the kept upstream connection when it goes to host and
// port and its address is still allowed, or dials a new one.
func (s *session) upstreamFor(ctx context.Context, ups *upstreams, pol Effective, host string, port int) (u *upstreamConn, reused bool, ref *refusal) {
	if cur := ups.cur; cur != nil {
		if cur.to.host == host && cur.to.port == port && pol.Addr(cur.to.addr, port, cur.to.trusted).Allowed {
			return cur, true, nil
		}
		ups.close()
		s.c.clearDest()
	}
	rt, ref := s.dial(ctx, pol, host, port)
	if ref != nil {
		return nil, false, ref
	}
	to := dest{host: host, port: port, addr: rt.addr.Addr(), trusted: rt.trusted}
	ups.cur = newUpstream(to, rt.conn, s.cfg().IdleTimeout)
	return ups.cur, false, nil
}

func (d dest) addrPort() string {
	if !d.addr.IsValid() {
		return ""
	}
	return destLabel(d.addr.String(), d.port)
}
