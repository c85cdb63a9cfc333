package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixture is a Gate served on a loopback listener, as the wiring serves it
// over the pipe, with the decisions it recorded.
type fixture struct {
	t     testing.TB
	proxy *Proxy
	gate  *Gate
	addr  string // the proxy listener's host:port

	mu        sync.Mutex // guards decisions
	decisions []Decision
	recorded  chan struct{} // receives after each decision, never blocking
}

// testCA is one authority per test binary for the upstream servers, and
// one for the proxy, so tests do not pay for key generation each time.
var (
	caOnce                  sync.Once
	upstreamCA, interceptCA *Authority
)

func authorities(t testing.TB) (upstream, intercept *Authority) {
	caOnce.Do(func() {
		var err error
		if upstreamCA, err = LoadOrCreateAuthority(t.TempDir()); err != nil {
			t.Fatal(err)
		}
		if interceptCA, err = LoadOrCreateAuthority(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	})
	return upstreamCA, interceptCA
}

func pool(as ...*Authority) *x509.CertPool {
	p := x509.NewCertPool()
	for _, a := range as {
		p.AddCert(a.Certificate())
	}
	return p
}

// pypi is the override every test names its loopback servers by.
var loopback = netip.MustParseAddr("127.0.0.1")

func baseConfig(t testing.TB) Config {
	up, ic := authorities(t)
	return Config{
		Hosts:     map[string][]netip.Addr{"pypi.test": {loopback}, "other.test": {loopback}},
		RootCAs:   pool(up),
		Authority: ic,
		Resolver:  fakeResolver{},
	}
}

// fakeResolver answers the names the tests use, with no network.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func mustLayered(t testing.TB, allow ...string) Effective {
	t.Helper()
	p, err := ParsePolicy(allow, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Layered(p)
}

func newFixture(t testing.TB, cfg Config, policy Effective, secrets []Secret) *fixture {
	t.Helper()
	f := &fixture{t: t, recorded: make(chan struct{}, 1)}
	user := cfg.Record
	cfg.Record = func(d Decision) {
		f.mu.Lock()
		f.decisions = append(f.decisions, d)
		f.mu.Unlock()
		if user != nil {
			user(d)
		}
		select {
		case f.recorded <- struct{}{}:
		default:
		}
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.proxy = p
	f.gate = p.Gate(Identity{Tenant: "acme", Sandbox: "sb1", Conversation: "conv1"}, policy, secrets)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.gate.Serve(ctx, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.gate.Close()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of Close")
		}
	})
	return f
}

// client is an http.Client that sends everything through the fixture's
// proxy and trusts the given authorities.
func (f *fixture) client(trust ...*Authority) (*http.Client, *http.Transport) {
	u, _ := url.Parse("http://" + f.addr)
	tr := &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{RootCAs: pool(trust...)},
	}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, tr
}

// waitDecision waits until a decision matching ok was recorded.
func (f *fixture) waitDecision(ok func(Decision) bool) Decision {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		for _, d := range f.decisions {
			if ok(d) {
				f.mu.Unlock()
				return d
			}
		}
		all := fmt.Sprintf("%+v", f.decisions)
		f.mu.Unlock()
		select {
		case <-f.recorded:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			f.t.Fatalf("no matching decision recorded within 10s; recorded: %s", all)
		}
	}
}

// waitCount waits until n decisions matching ok were recorded.
func (f *fixture) waitCount(n int, ok func(Decision) bool) []Decision {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []Decision
		for _, d := range f.allDecisions() {
			if ok(d) {
				got = append(got, d)
			}
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d matching decisions recorded within 10s, want %d: %+v", len(got), n, f.allDecisions())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) allDecisions() []Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Decision(nil), f.decisions...)
}

// rawRequest sends a request's raw text to the proxy on a new connection
// and reads the answer; the connection stays open for the caller.
func (f *fixture) rawRequest(text string) (*http.Response, string, net.Conn, *bufio.Reader) {
	f.t.Helper()
	c, err := net.DialTimeout("tcp", f.addr, 5*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		f.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method := strings.Fields(text)[0]
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		f.t.Fatalf("reading the proxy's answer to %q: %v", text, err)
	}
	body := ""
	if method != http.MethodConnect || resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			f.t.Fatal(err)
		}
		body = string(b)
	}
	return resp, body, c, br
}

// tlsServer starts an HTTPS server on loopback whose certificate the
// upstream authority signed for pypi.test and 127.0.0.1.
func tlsServer(t testing.TB, h http.Handler) (*httptest.Server, int) {
	t.Helper()
	up, _ := authorities(t)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused tunnels end handshakes early
	ipLeaf, err := up.Leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// Without a server name the first certificate answers (and httptest
	// would add its own if none were set).
	srv.TLS = &tls.Config{
		Certificates:   []tls.Certificate{*ipLeaf},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return up.Leaf(hi.ServerName) },
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port
}

func plainServer(t testing.TB, h http.Handler) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port
}

func checkRefusal(t testing.TB, resp *http.Response, body string, status int, sentence string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	if got := strings.TrimSuffix(body, "\n"); got != sentence {
		t.Errorf("body\n%q\nwant\n%q", got, sentence)
	}
}
