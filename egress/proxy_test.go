package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "hello from %s %s", r.Host, r.URL.Path)
}

func TestTunnelGET(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	up, _ := authorities(t)
	c, tr := f.client(up)
	url := fmt.Sprintf("https://pypi.test:%d/simple/", port)
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("hello from pypi.test:%d /simple/", port); string(body) != want {
		t.Fatalf("body %q, want %q", body, want)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != up.Certificate().Subject.CommonName || !resp.TLS.PeerCertificates[0].Equal(resp.TLS.PeerCertificates[0]) {
		t.Errorf("the tunnelled certificate was issued by %q", issuer)
	}
	if err := resp.TLS.PeerCertificates[0].CheckSignatureFrom(up.Certificate()); err != nil {
		t.Errorf("a tunnel that carries no secret must show the upstream's own certificate: %v", err)
	}
	tr.CloseIdleConnections()
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "connect" })
	want := Decision{Tenant: "acme", Sandbox: "sb1", Conversation: "conv1", Kind: "connect", Host: "pypi.test", Port: port,
		Addr: fmt.Sprintf("127.0.0.1:%d", port), Rule: "pypi.test", Allowed: true}
	if d.Tenant != want.Tenant || d.Sandbox != want.Sandbox || d.Conversation != want.Conversation || d.Kind != want.Kind ||
		d.Host != want.Host || d.Port != want.Port || d.Addr != want.Addr || d.Rule != want.Rule || !d.Allowed {
		t.Errorf("decision %+v, want %+v", d, want)
	}
	if d.BytesUp < 200 || d.BytesDown < 500 || d.Duration <= 0 || d.Time.IsZero() {
		t.Errorf("decision counts %d bytes up, %d down over %s; want a TLS exchange's worth each way", d.BytesUp, d.BytesDown, d.Duration)
	}
	if got := f.gate.Recent(10); len(got) != 1 || got[0].Host != "pypi.test" {
		t.Errorf("Recent = %+v, want the one decision", got)
	}
}

func TestPlainHTTPKeepAlive(t *testing.T) {
	_, port := plainServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" || r.Header.Get("Proxy-Connection") != "" {
			t.Errorf("hop-by-hop headers reached the server: %v", r.Header)
		}
		hello(w, r)
	}))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	c, tr := f.client()
	for i := range 2 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://pypi.test:%d/p%d", port, i), nil)
		req.Header.Set("Proxy-Authorization", "Basic eDp5")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("hello from pypi.test:%d /p%d", port, i); string(body) != want {
			t.Fatalf("body %q, want %q", body, want)
		}
	}
	tr.CloseIdleConnections()
	ds := f.waitCount(2, func(d Decision) bool { return d.Kind == "http" })
	for _, d := range ds {
		if !d.Allowed || d.Addr != fmt.Sprintf("127.0.0.1:%d", port) || d.BytesUp < 50 || d.BytesDown < 100 {
			t.Errorf("decision %+v, want allowed to 127.0.0.1:%d with each request's bytes counted", d, port)
		}
	}
	if len(ds) != 2 {
		t.Errorf("%d http decisions, want one per request: %+v", len(ds), ds)
	}
}

// TestRefusals checks each refusal the program sees before the tunnel
// opens: the status, the exact sentence, and the recorded decision.
func TestRefusals(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	cfg := baseConfig(t)
	cfg.Resolver = fakeResolver{
		"loop.evil.test":     {netip.MustParseAddr("127.0.0.1")},
		"private.evil.test":  {netip.MustParseAddr("10.1.2.3")},
		"metadata.evil.test": {netip.MustParseAddr("169.254.169.254")},
	}
	f := newFixture(t, cfg, mustLayered(t, "pypi.test", "*.evil.test", "registry.npmjs.org"), nil)
	tests := []struct {
		name, request string
		status        int
		sentence      string
		host          string
		reason        string
	}{
		{"unlisted host", "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", 403,
			"sandboxd: egress to pypi.org:443 is not allowed for this sandbox; allowed: pypi.test, *.evil.test, registry.npmjs.org. Ask the operator to add it.",
			"pypi.org", "denied by the deployment's policy: no allow rule matches pypi.org"},
		{"IP literal without a CIDR", "CONNECT 93.184.216.34:443 HTTP/1.1\r\n\r\n", 403,
			"sandboxd: egress to 93.184.216.34:443 is not allowed for this sandbox; allowed: pypi.test, *.evil.test, registry.npmjs.org. Ask the operator to add it.",
			"93.184.216.34", "denied by the deployment's policy: no allow CIDR holds the IP literal 93.184.216.34"},
		{"name resolving to loopback", "CONNECT loop.evil.test:443 HTTP/1.1\r\n\r\n", 403,
			"sandboxd: egress to loop.evil.test:443 is refused because loop.evil.test resolved to 127.0.0.1, a loopback address this sandbox may not reach; ask the operator for a rule naming that range, or to map the name in egress.hosts.",
			"loop.evil.test", "denied by the deployment's policy: 127.0.0.1 is a loopback address and no allow rule names that range"},
		{"name resolving to a private address", "CONNECT private.evil.test:443 HTTP/1.1\r\n\r\n", 403,
			"sandboxd: egress to private.evil.test:443 is refused because private.evil.test resolved to 10.1.2.3, a private (RFC 1918) address this sandbox may not reach; ask the operator for a rule naming that range, or to map the name in egress.hosts.",
			"private.evil.test", "denied by the deployment's policy: 10.1.2.3 is a private (RFC 1918) address and no allow rule names that range"},
		{"name resolving to the metadata address", "GET http://metadata.evil.test/latest/meta-data/ HTTP/1.1\r\nHost: metadata.evil.test\r\n\r\n", 403,
			"sandboxd: egress to metadata.evil.test:80 is refused because metadata.evil.test resolved to 169.254.169.254, a link-local address this sandbox may not reach; ask the operator for a rule naming that range, or to map the name in egress.hosts.",
			"metadata.evil.test", "denied by the deployment's policy: 169.254.169.254 is a link-local address and no allow rule names that range"},
		{"Host header differing from the URL", "GET http://pypi.test/simple/ HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n", 403,
			`sandboxd: the request's Host header "registry.npmjs.org" does not match its URL's host pypi.test:80; send the same host in both.`,
			"pypi.test", `the Host header "registry.npmjs.org" is not the URL's host pypi.test:80`},
		{"origin-form request", "GET /simple/ HTTP/1.1\r\nHost: pypi.test\r\n\r\n", 400,
			"sandboxd: this is an HTTP proxy and the request for /simple/ names no host; point HTTP_PROXY at the proxy so that programs send absolute URLs such as http://example.com/path.",
			"", "the request names no host: the program sent it to the proxy as if to a server"},
		{"DNS failure", "CONNECT nowhere.evil.test:443 HTTP/1.1\r\n\r\n", 502,
			"sandboxd: nowhere.evil.test does not resolve: DNS has no such host; check the name, or ask the operator to add it to egress.hosts.",
			"nowhere.evil.test", "DNS has no such host"},
		{"connection refused", fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", closedPort), 502,
			fmt.Sprintf("sandboxd: connecting to pypi.test:%d (127.0.0.1:%d) failed: the connection was refused.", closedPort, closedPort),
			"pypi.test", "connecting failed: the connection was refused"},
		{"CONNECT without a port", "CONNECT pypi.test HTTP/1.1\r\n\r\n", 400,
			`sandboxd: CONNECT needs host:port, and "pypi.test" is not host:port; send CONNECT example.com:443.`,
			"", `bad CONNECT target: "pypi.test" is not host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _, _ := f.rawRequest(tt.request)
			checkRefusal(t, resp, body, tt.status, tt.sentence)
			d := f.waitDecision(func(d Decision) bool { return d.Reason == tt.reason })
			if d.Allowed || d.Host != tt.host {
				t.Errorf("decision %+v, want refused for host %q", d, tt.host)
			}
		})
	}
}

// TestSNIMismatch opens a tunnel to an allowed host and then names another
// in the ClientHello, as a program dodging the policy would.
func TestSNIMismatch(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	resp, _, c, _ := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	up, _ := authorities(t)
	err := tls.Client(c, &tls.Config{ServerName: "evil.example", RootCAs: pool(up)}).Handshake()
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("handshake with another server name: %v, want the proxy's access_denied alert", err)
	}
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "connect" })
	if want := "server name evil.example in the ClientHello is not the host pypi.test the tunnel was opened for"; d.Allowed || d.Reason != want {
		t.Errorf("decision %+v, want refused: %s", d, want)
	}
}

// TestSNICaseAndDot accepts a server name that differs from the host only
// in case and a trailing dot.
func TestSNICaseAndDot(t *testing.T) {
	if why := sniMismatch("pypi.test", normalizeHost("PyPI.Test.")); why != "" {
		t.Errorf("case and trailing dot refused: %s", why)
	}
	if why := sniMismatch("", "127.0.0.1"); why != "" {
		t.Errorf("no server name to an IP literal refused: %s", why)
	}
	if why := sniMismatch("", "pypi.test"); why == "" {
		t.Error("no server name to a named host accepted")
	}
}

func TestNotTLSInTunnel(t *testing.T) {
	_, port := plainServer(t, http.HandlerFunc(hello))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	resp, _, c, br := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: pypi.test\r\n\r\n")
	inner, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("plain HTTP in the tunnel got no HTTP answer: %v", err)
	}
	body, _ := io.ReadAll(inner.Body)
	checkRefusal(t, inner, string(body), 403, fmt.Sprintf("sandboxd: the tunnel to pypi.test:%d carries TLS only; use an https:// URL, or send plain HTTP to the proxy without CONNECT.", port))
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "connect" })
	if d.Allowed || d.Reason != reasonNotTLS {
		t.Errorf("decision %+v, want refused: %s", d, reasonNotTLS)
	}

	// Binary that is not TLS gets no answer at all: the tunnel closes.
	resp, _, c, br = f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	c.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	if n, err := io.Copy(io.Discard, br); n != 0 || err != nil {
		t.Errorf("after binary junk the tunnel sent %d bytes (%v), want a clean close", n, err)
	}
}

func TestHeaderTooLarge(t *testing.T) {
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test"), nil)
	resp, body, _, _ := f.rawRequest("GET http://pypi.test/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n")
	checkRefusal(t, resp, body, 431, "sandboxd: the request's header is larger than the 64 KiB the proxy accepts; send a smaller request.")
}

func TestMaxConns(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	cfg := baseConfig(t)
	cfg.MaxConns = 1
	f := newFixture(t, cfg, mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	resp, _, _, _ := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatalf("first CONNECT answered %s", resp.Status)
	}
	if n := f.gate.Open(); n != 1 {
		t.Errorf("Open() = %d with one tunnel open, want 1", n)
	}
	resp, body, _, _ := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	checkRefusal(t, resp, body, 429, "sandboxd: this sandbox has reached its limit of 1 open connections through the proxy; close some and retry.")
	d := f.waitDecision(func(d Decision) bool { return strings.Contains(d.Reason, "limit") })
	if d.Allowed || d.Host != "pypi.test" || d.Port != port {
		t.Errorf("decision %+v, want refused for pypi.test:%d", d, port)
	}
}

// TestIdleTimeout checks a tunnel idle both ways, and a kept-alive client
// connection waiting for its next request, are closed.
func TestIdleTimeout(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	_, plainPort := plainServer(t, http.HandlerFunc(hello))
	cfg := baseConfig(t)
	cfg.IdleTimeout = 300 * time.Millisecond
	f := newFixture(t, cfg, mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	up, _ := authorities(t)

	resp, _, c, _ := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "pypi.test", RootCAs: pool(up)})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("an idle tunnel was still open after %s (read: %v)", time.Since(start), err)
	}

	resp, body, c, _ := f.rawRequest(fmt.Sprintf("GET http://pypi.test:%d/ HTTP/1.1\r\nHost: pypi.test:%d\r\n\r\n", plainPort, plainPort))
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "hello") {
		t.Fatalf("plain GET answered %s %q", resp.Status, body)
	}
	start = time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("an idle kept-alive connection was still open after %s (read: %v)", time.Since(start), err)
	}
}

func TestCloseEndsServe(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	_, _, c, _ := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
	f.gate.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after Close the tunnel read %v, want EOF", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.gate.Open() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.gate.Open(); n != 0 {
		t.Errorf("Open() = %d after Close, want 0", n)
	}
}

// TestTunnelToIPLiteral opens a tunnel to an address a CIDR rule allows; a
// TLS client sends no server name for an IP, which such a tunnel accepts.
func TestTunnelToIPLiteral(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	f := newFixture(t, baseConfig(t), mustLayered(t, "127.0.0.0/8"), nil)
	up, _ := authorities(t)
	c, tr := f.client(up)
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/x", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("hello from 127.0.0.1:%d /x", port); string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
	tr.CloseIdleConnections()
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "connect" })
	if !d.Allowed || d.Rule != "127.0.0.0/8" || d.Host != "127.0.0.1" {
		t.Errorf("decision %+v, want allowed by 127.0.0.0/8", d)
	}
}
