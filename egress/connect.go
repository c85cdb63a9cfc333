package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Reasons recorded for tunnels refused after the 200, when no HTTP response
// can reach the program any more.
const reasonNotTLS = "not TLS: CONNECT tunnels carry TLS only"

// tlsAccessDenied is a plaintext TLS alert record (fatal, access_denied): a
// TLS client shows it as "access denied" instead of a bare reset.
var tlsAccessDenied = []byte{21, 3, 3, 0, 2, 2, 49}

// connect serves a CONNECT request: decide the host, dial a decided address,
// answer 200, check the ClientHello names the host, then splice the tunnel
// or, when a secret names the host, intercept it.
func (s *session) connect(ctx context.Context, req *http.Request) {
	d, finish := s.begin("connect")
	defer finish()
	host, port, err := splitHostPort(req.RequestURI, 0)
	if err != nil {
		d.Reason = "bad CONNECT target: " + err.Error()
		writeRefusal(s.c, http.StatusBadRequest, fmt.Sprintf("sandboxd: CONNECT needs host:port, and %s; send CONNECT example.com:443.", err))
		return
	}
	d.Host, d.Port = host, port
	pol, secrets := s.g.state()
	v := pol.Host(host, port)
	d.Rule, d.Reason = v.Rule, v.Why
	if !v.Allowed {
		r := hostRefusal(pol, host, port, v)
		writeRefusal(s.c, r.status, r.sentence)
		return
	}
	inject := matchSecrets(secrets, host, port)
	if len(inject) > 0 && s.cfg().Authority == nil {
		d.Reason = "refused: secret " + inject[0].Name + " names this host but the proxy has no certificate authority to intercept HTTPS"
		writeRefusal(s.c, http.StatusServiceUnavailable, fmt.Sprintf("sandboxd: the secret %s is set for %s, but this deployment has no certificate authority to add it to HTTPS requests; ask the operator to configure one.", inject[0].Name, destLabel(host, port)))
		return
	}
	rt, ref := s.dial(ctx, pol, host, port)
	if ref != nil {
		d.Reason, d.Addr = ref.reason, ref.addr
		writeRefusal(s.c, ref.status, ref.sentence)
		return
	}
	defer rt.conn.Close()
	d.Addr, d.Rule = rt.addr.String(), ruleOf(v, rt.addrRule)
	target := dest{host: host, port: port, addr: rt.addr.Addr(), trusted: rt.trusted}
	if !s.c.setDest(target, rt.conn) {
		d.Reason = s.c.cutReason()
		writeRefusal(s.c, http.StatusForbidden, RefusalMessage(host, port, s.g.Policy().Allowed()))
		return
	}
	defer s.c.clearDest()
	if _, err := io.WriteString(s.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		d.Reason = "the client went away before the tunnel opened"
		return
	}
	s.c.SetReadDeadline(time.Now().Add(helloTimeout))
	hello, raw, err := ReadClientHello(s.br, DefaultClientHelloMax)
	s.c.SetReadDeadline(time.Time{})
	if err != nil {
		d.Reason = helloReason(err)
		if errors.Is(err, ErrNotTLS) && len(raw) > 0 && raw[0] >= 'A' && raw[0] <= 'Z' {
			// A program that sent plain HTTP into the tunnel reads an HTTP
			// answer, so it can show why.
			writeRefusal(s.c, http.StatusForbidden, fmt.Sprintf("sandboxd: the tunnel to %s carries TLS only; use an https:// URL, or send plain HTTP to the proxy without CONNECT.", destLabel(host, port)))
		} else if !errors.Is(err, ErrNotTLS) {
			s.c.Write(tlsAccessDenied)
		}
		return
	}
	if why := sniMismatch(hello.ServerName, host); why != "" {
		d.Reason = why
		s.c.Write(tlsAccessDenied)
		return
	}
	if len(inject) > 0 {
		d.Reason = v.Why + "; intercepted to add secrets"
		if cut := s.intercept(ctx, target, rt.conn, raw); cut != "" {
			d.Reason = cut
			return
		}
		d.Allowed = true
		return
	}
	rt.conn.SetWriteDeadline(time.Now().Add(s.cfg().IdleTimeout))
	if _, err := rt.conn.Write(raw); err != nil {
		d.Reason = "writing the ClientHello upstream failed: " + dialWhy(err)
		return
	}
	rt.conn.SetWriteDeadline(time.Time{})
	splice(s.br, s.c, rt.conn, s.cfg().IdleTimeout)
	if cut := s.c.cutReason(); cut != "" {
		d.Allowed, d.Reason = false, cut
		return
	}
	d.Allowed = true
}

// helloReason words a ClientHello that could not be read for the record.
func helloReason(err error) string {
	if errors.Is(err, ErrNotTLS) {
		return reasonNotTLS
	}
	return "refused: " + err.Error()
}

// sniMismatch returns why a ClientHello's server name does not fit the host
// the tunnel was opened for, or "" when it does. A missing server name is
// accepted only for an IP literal, which has no name to send.
func sniMismatch(serverName, host string) string {
	_, lit := netip.ParseAddr(host)
	if serverName == "" {
		if lit == nil {
			return ""
		}
		return fmt.Sprintf("the ClientHello names no server, which only a tunnel to an IP literal may omit; the tunnel was opened for %s", host)
	}
	if serverName != host {
		return fmt.Sprintf("server name %s in the ClientHello is not the host %s the tunnel was opened for", serverName, host)
	}
	return ""
}

// upstreamConn is one upstream connection with its reader; to says which
// decided destination it reaches, so it is never reused for another.
type upstreamConn struct {
	to   dest
	conn net.Conn
	cr   *capReader
	br   *bufio.Reader
}

// upstreams holds the one kept-alive upstream connection of a client
// connection.
type upstreams struct {
	cur *upstreamConn
}

func (u *upstreams) close() {
	if u.cur != nil {
		u.cur.conn.Close()
		u.cur = nil
	}
}

// replay is the raw ClientHello followed by what the client sends next.
func replay(raw []byte, rest io.Reader) io.Reader {
	return io.MultiReader(bytes.NewReader(raw), rest)
}
