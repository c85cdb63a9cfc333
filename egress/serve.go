package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// session is the state of one Serve call.
type session struct {
	g  *Gate
	c  *clientConn
	br *bufio.Reader // reads c; its size is the cap on a request's header block
	// markUp and markDown are the client's byte counts when the current
	// request began to arrive, so its record counts its own header.
	markUp, markDown int64
}

// begin starts the record of one decision of kind, from the current
// request's start (mark); finish fills in its bytes and duration and
// records it.
func (s *session) begin(kind string) (d *Decision, finish func()) {
	start := time.Now()
	d = &Decision{Time: start, Kind: kind}
	up0, down0 := s.markUp, s.markDown
	return d, func() {
		d.BytesUp, d.BytesDown = s.c.up.Load()-up0, s.c.down.Load()-down0
		d.Duration = time.Since(start)
		s.g.record(*d)
	}
}

// mark notes the byte counts at the start of a request.
func (s *session) mark() { s.markUp, s.markDown = s.c.up.Load(), s.c.down.Load() }

// Serve serves one client connection speaking the HTTP proxy protocol until
// it ends, then closes it. CONNECT opens a tunnel; any other method is a
// plain-HTTP request, and several may follow on one connection. Serve
// returns when the client is done, on an error, when ctx ends, when a policy
// change refuses the connection's destination, or on Close.
func (g *Gate) Serve(ctx context.Context, conn net.Conn) {
	c := &clientConn{Conn: conn, g: g}
	counted, ok := g.admit(c)
	if !ok {
		conn.Close()
		return
	}
	defer g.release(c)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { c.cut("cut because the sandbox's connection ended") })
	defer stop()
	defer func() {
		// A bug must not take down the daemon serving every other sandbox.
		if r := recover(); r != nil {
			g.p.cfg.Log.Error("egress proxy panic", "sandbox", g.id.Sandbox, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	s := &session{g: g, c: c, br: bufio.NewReaderSize(c, maxHeaderBytes)}
	if !counted {
		s.refuseBusy()
		return
	}
	s.loop(ctx)
}

func (s *session) cfg() *Config { return &s.g.p.cfg }

// loop reads requests until one ends the connection.
func (s *session) loop(ctx context.Context) {
	wait := min(headerTimeout, s.cfg().IdleTimeout)
	up := &upstreams{}
	defer up.close()
	for {
		s.c.SetReadDeadline(time.Now().Add(wait))
		s.mark()
		req, hostHeader, err := readRequest(s.br)
		if err != nil {
			badRequest(s.c, err)
			return
		}
		s.c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			s.connect(ctx, req)
			return
		}
		if !s.plainHTTP(ctx, req, hostHeader, up) {
			return
		}
		wait = s.cfg().IdleTimeout
	}
}

// refuseBusy answers a connection beyond MaxConns with a 429 once its
// request arrived, so the program shows why.
func (s *session) refuseBusy() {
	s.c.SetReadDeadline(time.Now().Add(min(headerTimeout, s.cfg().IdleTimeout)))
	req, _, err := readRequest(s.br)
	if err != nil {
		return
	}
	host, port := requestTarget(req)
	msg := fmt.Sprintf("sandboxd: this sandbox has reached its limit of %d open connections through the proxy; close some and retry.", s.cfg().MaxConns)
	writeRefusal(s.c, http.StatusTooManyRequests, msg)
	kind := "http"
	if req.Method == http.MethodConnect {
		kind = "connect"
	}
	s.g.record(Decision{Kind: kind, Host: host, Port: port, Reason: fmt.Sprintf("refused: the sandbox has reached its limit of %d open connections", s.cfg().MaxConns)})
}

// requestTarget is the host and port a request names, as well as it can be
// read, for the record of a refusal.
func requestTarget(req *http.Request) (string, int) {
	if req.Method == http.MethodConnect {
		h, p, _ := splitHostPort(req.RequestURI, 0)
		return h, p
	}
	if req.URL != nil && req.URL.Host != "" {
		h, p, _ := splitHostPort(req.URL.Host, 80)
		return h, p
	}
	return "", 0
}

// errNotHTTP marks a header block ReadRequest could not parse.
var errNotHTTP = errors.New("not an HTTP request")

// readRequest reads one request. The whole header block must fit in br's
// buffer, which caps it; hostHeader is the request's Host header, which
// http.ReadRequest drops for absolute-form requests, with ok false when
// there is none and an error when there are several.
func readRequest(br *bufio.Reader) (req *http.Request, hostHeader hostField, err error) {
	scanned := 0
	for {
		buf, _ := br.Peek(br.Buffered())
		if n := headerEnd(buf, scanned); n >= 0 {
			hostHeader = findHost(buf[:n])
			break
		}
		scanned = len(buf)
		if len(buf) == br.Size() {
			return nil, hostHeader, errHeaderTooLarge
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			if len(buf) > 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				return nil, hostHeader, fmt.Errorf("%w: the connection closed in the middle of the request's header", errNotHTTP)
			}
			return nil, hostHeader, err
		}
	}
	req, err = http.ReadRequest(br)
	if err != nil {
		return nil, hostHeader, fmt.Errorf("%w: %v", errNotHTTP, err)
	}
	return req, hostHeader, nil
}

// hostField is what a request's Host header says.
type hostField struct {
	value    string
	present  bool
	multiple bool
}

func findHost(head []byte) hostField {
	var h hostField
	lines := strings.Split(string(head), "\n")
	for _, l := range lines[1:] {
		l = strings.TrimRight(l, "\r")
		name, value, ok := strings.Cut(l, ":")
		if !ok || !strings.EqualFold(name, "Host") {
			continue
		}
		if h.present {
			h.multiple = true
		}
		h.value, h.present = strings.TrimSpace(value), true
	}
	return h
}

// badRequest answers a request that could not be read, when the client is
// still there to read the answer.
func badRequest(w io.Writer, err error) {
	switch {
	case errors.Is(err, errHeaderTooLarge):
		writeRefusal(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("sandboxd: the request's header is larger than the %d KiB the proxy accepts; send a smaller request.", maxHeaderBytes>>10))
	case errors.Is(err, errNotHTTP):
		writeRefusal(w, http.StatusBadRequest, "sandboxd: the proxy could not read an HTTP request on this connection; send HTTP/1.1 proxy requests (an absolute URL, or CONNECT host:port).")
	}
}

// writeRefusal writes a complete response whose body is one sentence, and
// says the connection closes after it.
func writeRefusal(w io.Writer, status int, sentence string) {
	body := sentence + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n%s",
		status, reasonPhrase(status, sentence), len(body), body)
}

// reasonPhrase is the status line's text: the sentence itself, because
// what a client shows of a refused CONNECT is often only that line (pip:
// "Tunnel connection failed: 403 sandboxd: egress to ..."), never the body.
// A status line holds no control characters and stays short.
func reasonPhrase(status int, sentence string) string {
	r := []rune(sentence)
	if len(r) > 400 {
		r = append(r[:397], '.', '.', '.')
	}
	out := make([]rune, 0, len(r))
	for _, c := range r {
		if c < 0x20 || c == 0x7f {
			c = ' '
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return http.StatusText(status)
	}
	return string(out)
}

// splitHostPort splits "host:port" (port optional when def is not 0) and
// checks the host is a DNS name or an IP literal; the host comes back lower
// case, without brackets or a trailing dot.
func splitHostPort(hostport string, def int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("%q is not host:port", hostport)
		}
		host, portStr = hostport, ""
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
	}
	port := def
	if portStr != "" {
		n, err := strconv.Atoi(portStr)
		if err != nil || n < 1 || n > 65535 || portStr[0] == '+' || portStr[0] == '-' {
			return "", 0, fmt.Errorf("%q has port %q, not a number from 1 to 65535", hostport, portStr)
		}
		port = n
	} else if def == 0 {
		return "", 0, fmt.Errorf("%q has no port", hostport)
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", 0, fmt.Errorf("%q names an address with an interface zone", hostport)
		}
		return ip.String(), port, nil
	}
	if !validName(host) {
		return "", 0, fmt.Errorf("%q is not a valid host name", hostport)
	}
	return host, port, nil
}

// validName reports whether s is a DNS name: labels of letters, digits,
// '-' and '_', none empty or longer than 63, 253 bytes in all.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// refusal is a failure before any byte went upstream, answered to the client
// as an HTTP response.
type refusal struct {
	status   int
	sentence string
	reason   string // for the decision record
	addr     string // the address it concerned, if any
}

// route is a destination decided and dialed.
type route struct {
	conn     net.Conn
	addr     netip.AddrPort
	trusted  bool
	addrRule string
}

// destLabel is host:port as a program names it.
func destLabel(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// dial resolves host (an override first, trusted; an IP literal as itself;
// otherwise the resolver, untrusted), decides each address under pol, and
// connects to the first allowed one that answers.
func (s *session) dial(ctx context.Context, pol Effective, host string, port int) (route, *refusal) {
	cfg := s.cfg()
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	label := destLabel(host, port)
	var addrs []netip.Addr
	trusted := false
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if o, ok := cfg.Hosts[host]; ok {
		addrs, trusted = o, true
	} else {
		found, err := cfg.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return route{}, dnsRefusal(host, err, cfg.ConnectTimeout)
		}
		addrs = found
	}
	if len(addrs) == 0 {
		return route{}, &refusal{status: http.StatusBadGateway,
			sentence: fmt.Sprintf("sandboxd: %s has no address; check the name, or ask the operator to add it to egress.hosts.", host),
			reason:   "the name has no address"}
	}
	var refused *refusal
	var dialErr error
	var dialed netip.AddrPort
	for _, ip := range addrs[:min(len(addrs), maxAddrs)] {
		ip = ip.Unmap().WithZone("")
		ap := netip.AddrPortFrom(ip, uint16(port))
		v := pol.Addr(ip, port, trusted)
		if !v.Allowed {
			if refused == nil {
				refused = addrRefusal(host, port, ip, v)
			}
			continue
		}
		conn, err := cfg.Dial(ctx, "tcp", ap.String())
		if err == nil {
			return route{conn: conn, addr: ap, trusted: trusted, addrRule: v.Rule}, nil
		}
		dialErr, dialed = err, ap
		if ctx.Err() != nil {
			break
		}
	}
	if dialErr == nil {
		return route{}, refused
	}
	if errors.Is(dialErr, context.DeadlineExceeded) || errors.Is(dialErr, os.ErrDeadlineExceeded) {
		return route{}, &refusal{status: http.StatusGatewayTimeout, addr: dialed.String(),
			sentence: fmt.Sprintf("sandboxd: connecting to %s (%s) timed out after %s; the server did not answer.", label, dialed, cfg.ConnectTimeout),
			reason:   fmt.Sprintf("connecting timed out after %s", cfg.ConnectTimeout)}
	}
	why := dialWhy(dialErr)
	return route{}, &refusal{status: http.StatusBadGateway, addr: dialed.String(),
		sentence: fmt.Sprintf("sandboxd: connecting to %s (%s) failed: %s.", label, dialed, why),
		reason:   "connecting failed: " + why}
}

func dialWhy(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to the address"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

func dnsRefusal(host string, err error, timeout time.Duration) *refusal {
	var de *net.DNSError
	switch {
	case errors.As(err, &de) && de.IsNotFound:
		return &refusal{status: http.StatusBadGateway,
			sentence: fmt.Sprintf("sandboxd: %s does not resolve: DNS has no such host; check the name, or ask the operator to add it to egress.hosts.", host),
			reason:   "DNS has no such host"}
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de) && de.IsTimeout:
		return &refusal{status: http.StatusGatewayTimeout,
			sentence: fmt.Sprintf("sandboxd: resolving %s timed out after %s; retry later.", host, timeout),
			reason:   "resolving timed out"}
	}
	why := err.Error()
	if de != nil {
		why = de.Err
	}
	return &refusal{status: http.StatusBadGateway,
		sentence: fmt.Sprintf("sandboxd: resolving %s failed (%s); retry later, or ask the operator to add it to egress.hosts.", host, why),
		reason:   "resolving failed: " + why}
}

// addrRefusal words the refusal of an address an allowed name resolved to.
func addrRefusal(host string, port int, ip netip.Addr, v Verdict) *refusal {
	label := destLabel(host, port)
	var sentence string
	if rng, ok := specialRange(ip); ok && v.Rule == "" {
		sentence = fmt.Sprintf("sandboxd: egress to %s is refused because %s resolved to %s, a %s address this sandbox may not reach; ask the operator for a rule naming that range, or to map the name in egress.hosts.", label, host, ip, rng.name)
	} else {
		sentence = fmt.Sprintf("sandboxd: egress to %s is refused because %s resolved to %s, which the policy denies; ask the operator to allow that address.", label, host, ip)
	}
	return &refusal{status: http.StatusForbidden, sentence: sentence, reason: v.Why, addr: netip.AddrPortFrom(ip, uint16(port)).String()}
}

// hostRefusal words the refusal of a host name or literal.
func hostRefusal(pol Effective, host string, port int, v Verdict) *refusal {
	return &refusal{status: http.StatusForbidden, sentence: RefusalMessage(host, port, pol.Allowed()), reason: v.Why}
}

// ruleOf is the rule to record: the host's, or the address's when the host
// was allowed without naming a rule.
func ruleOf(host Verdict, addrRule string) string {
	if host.Rule != "" {
		return host.Rule
	}
	return addrRule
}
