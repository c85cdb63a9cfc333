package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// intercept terminates the client's TLS with a leaf certificate for the
// tunnel's host and serves the HTTP/1.1 requests inside, each decided again
// under the current policy and sent to the tunnel's decided address over a
// TLS connection verified against Config.RootCAs, with the secrets set. up
// is the connection dialed for the CONNECT, used for the first request. It
// returns a reason when the tunnel ended in a refusal.
func (s *session) intercept(ctx context.Context, target dest, up net.Conn, hello []byte) string {
	leaf, err := s.cfg().Authority.Leaf(target.host)
	if err != nil {
		return "refused: " + err.Error()
	}
	tc := tls.Server(&prefixConn{Conn: s.c, r: replay(hello, s.br)}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(headerTimeout))
	if err := tc.Handshake(); err != nil {
		return "refused: the client's TLS handshake with the proxy failed (does the sandbox trust the proxy's CA?): " + errText(err)
	}
	tc.SetDeadline(time.Time{})
	cl := clientSide{conn: tc, br: bufio.NewReaderSize(tc, maxHeaderBytes)}
	ups := &upstreams{}
	defer ups.close()
	wait := min(headerTimeout, s.cfg().IdleTimeout)
	for {
		tc.SetReadDeadline(time.Now().Add(wait))
		s.mark()
		req, hh, err := readRequest(cl.br)
		if err != nil {
			badRequest(tc, err)
			return s.c.cutReason()
		}
		tc.SetReadDeadline(time.Time{})
		keep := s.interceptRequest(ctx, req, hh, target, &up, ups, cl)
		if cut := s.c.cutReason(); cut != "" {
			return cut
		}
		if !keep {
			return ""
		}
		wait = s.cfg().IdleTimeout
	}
}

// interceptRequest serves one request inside an intercepted tunnel and
// reports whether the tunnel may carry another.
func (s *session) interceptRequest(ctx context.Context, req *http.Request, hh hostField, target dest, first *net.Conn, ups *upstreams, cl clientSide) bool {
	label := destLabel(target.host, target.port)
	d, finish := s.begin("intercept")
	defer finish()
	d.Host, d.Port, d.Addr = target.host, target.port, target.addrPort()
	refuse := func(status int, reason, sentence string) bool {
		d.Reason = reason
		writeRefusal(cl.conn, status, sentence)
		return false
	}
	if req.Method == http.MethodConnect {
		return refuse(http.StatusBadRequest, "a CONNECT inside an intercepted tunnel", "sandboxd: a CONNECT cannot travel inside a tunnel; open each tunnel from the proxy itself.")
	}
	if why := interceptHostMismatch(req, hh, target); why != "" {
		return refuse(http.StatusForbidden, why, fmt.Sprintf("sandboxd: %s; a tunnel carries requests for its own host only.", why))
	}
	pol, secrets := s.g.state()
	v := pol.Host(target.host, target.port)
	if v.Allowed {
		va := pol.Addr(target.addr, target.port, target.trusted)
		if !va.Allowed {
			v = va
		}
	}
	d.Rule, d.Reason = v.Rule, v.Why
	if !v.Allowed {
		return refuse(http.StatusForbidden, v.Why, RefusalMessage(target.host, target.port, pol.Allowed()))
	}
	var inj *injection
	if matched := matchSecrets(secrets, target.host, target.port); len(matched) > 0 {
		var err error
		if inj, err = render(matched); err != nil {
			return refuse(http.StatusBadGateway, err.Error(), fmt.Sprintf("sandboxd: %s; ask the operator to fix it.", err))
		}
		d.Secrets = inj.names
	}
	req.Host = hostForHeader(target)
	req.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	req.RequestURI = ""
	for attempt := 0; ; attempt++ {
		reused := ups.cur != nil
		if ups.cur == nil {
			u, ref := s.dialTLS(ctx, target, first)
			if ref != nil {
				return refuse(ref.status, ref.reason, ref.sentence)
			}
			ups.cur = u
			if !s.c.setDest(target, u.conn) {
				d.Reason = s.c.cutReason()
				return false
			}
		}
		o := s.exchange(req, ups.cur, cl, inj, label)
		if o.stale && reused && attempt == 0 && (req.Body == nil || req.Body == http.NoBody) {
			ups.close()
			continue
		}
		if o.stale {
			o.reason = "the upstream closed the connection without answering"
			writeRefusal(cl.conn, http.StatusBadGateway, fmt.Sprintf("sandboxd: the server at %s closed the connection without answering; retry.", label))
		}
		if !o.keepUp {
			ups.close()
		}
		d.Allowed = true
		if o.reason != "" {
			d.Reason = o.reason
		}
		if cut := s.c.cutReason(); cut != "" {
			d.Allowed, d.Reason = false, cut
		}
		return o.keepClient
	}
}

// interceptHostMismatch says why a request inside a tunnel names another
// host than the tunnel's, or returns "".
func interceptHostMismatch(req *http.Request, hh hostField, target dest) string {
	label := destLabel(target.host, target.port)
	if hh.multiple {
		return "the request has more than one Host header"
	}
	names := []string{}
	if req.URL.IsAbs() {
		if req.URL.Scheme != "https" {
			return fmt.Sprintf("the request's URL scheme %.20q is not https", req.URL.Scheme)
		}
		names = append(names, req.URL.Host)
	}
	if hh.present {
		names = append(names, hh.value)
	}
	if len(names) == 0 {
		return "the request has no Host header"
	}
	for _, n := range names {
		h, p, err := splitHostPort(n, 443)
		if err != nil || h != target.host || p != target.port {
			return fmt.Sprintf("the request's Host %.100q is not %s, the host this tunnel was opened for", n, label)
		}
	}
	return ""
}

// hostForHeader is the Host header value for the tunnel's destination.
func hostForHeader(t dest) string {
	if t.port == 443 {
		if ip, err := netip.ParseAddr(t.host); err == nil && ip.Is6() {
			return "[" + t.host + "]"
		}
		return t.host
	}
	return destLabel(t.host, t.port)
}

// dialTLS opens the TLS connection to the tunnel's decided address: the
// CONNECT's own connection the first time, a new one to the same address
// after that.
func (s *session) dialTLS(ctx context.Context, target dest, first *net.Conn) (*upstreamConn, *refusal) {
	cfg := s.cfg()
	label := destLabel(target.host, target.port)
	ap := target.addrPort()
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	conn := *first
	*first = nil
	if conn == nil {
		var err error
		conn, err = cfg.Dial(ctx, "tcp", ap)
		if err != nil {
			return nil, &refusal{status: http.StatusBadGateway, addr: ap,
				sentence: fmt.Sprintf("sandboxd: connecting to %s (%s) failed: %s.", label, ap, dialWhy(err)),
				reason:   "connecting failed: " + dialWhy(err)}
		}
	}
	tc := tls.Client(conn, &tls.Config{
		ServerName: target.host,
		RootCAs:    cfg.RootCAs,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		var unknown x509.UnknownAuthorityError
		var invalid x509.CertificateInvalidError
		var hostErr x509.HostnameError
		switch {
		case errors.As(err, &unknown):
			return nil, &refusal{status: http.StatusBadGateway, addr: ap,
				sentence: fmt.Sprintf("sandboxd: the server at %s presented a certificate signed by an authority the proxy does not trust; ask the operator to add its CA to egress.ca_files.", label),
				reason:   "the upstream's certificate is signed by an unknown authority"}
		case errors.As(err, &hostErr):
			return nil, &refusal{status: http.StatusBadGateway, addr: ap,
				sentence: fmt.Sprintf("sandboxd: the server at %s presented a certificate for another name (%s); the proxy refuses to send secrets to it.", label, errText(err)),
				reason:   "the upstream's certificate does not name the host"}
		case errors.As(err, &invalid):
			return nil, &refusal{status: http.StatusBadGateway, addr: ap,
				sentence: fmt.Sprintf("sandboxd: the server at %s presented an invalid certificate (%s); the proxy refuses to send secrets to it.", label, errText(err)),
				reason:   "the upstream's certificate is invalid"}
		}
		return nil, &refusal{status: http.StatusBadGateway, addr: ap,
			sentence: fmt.Sprintf("sandboxd: the TLS handshake with %s failed (%s).", label, errText(err)),
			reason:   "the upstream TLS handshake failed: " + errText(err)}
	}
	return newUpstream(target, tc, cfg.IdleTimeout), nil
}
