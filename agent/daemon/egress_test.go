package daemon_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// testCA is a CA certificate in PEM, as sandboxd sends it.
func testCA(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// answerAsProxy is a stand-in for sandboxd's proxy: it answers each request
// on a carried connection with the host it was for and the program's peer.
func answerAsProxy(in proto.Incoming, conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		body := fmt.Sprintf("kind=%s host=%s peer-is-loopback=%v", in.Kind, req.URL.Host, strings.HasPrefix(in.Peer, "127.0.0.1:"))
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func proxiedGet(t *testing.T, proxy, target string) (int, string) {
	t.Helper()
	pu, err := url.Parse(proxy)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}}
	resp, err := hc.Get(target)
	if err != nil {
		t.Fatalf("GET %s through %s: %v", target, proxy, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// egressPair is a daemon with a state dir and its own system bundle (never
// the machine's), and a client with the proxy turned on.
func egressPair(t *testing.T, opts ...daemon.Option) (srv *daemon.Server, c *agent.Client, state, system string) {
	t.Helper()
	dir := t.TempDir()
	state = filepath.Join(dir, "agent", "journal")
	system = filepath.Join(dir, "system-bundle.crt")
	if err := os.WriteFile(system, []byte(testCA(t, "system root")), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, c = startPair(t, append([]daemon.Option{daemon.WithStateDir(state), daemon.WithSystemBundle(system)}, opts...)...)
	return srv, c, state, system
}

func TestEgressCarriesProxiedConnectionsToTheClient(t *testing.T) {
	_, c, _, system := egressPair(t)
	ctx := testCtx(t)
	c.HandleIncoming(answerAsProxy)
	ca := testCA(t, "sandboxd egress")
	resp, err := c.Egress(ctx, ca)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Proxy, "http://127.0.0.1:") {
		t.Fatalf("proxy %q is not on the loopback", resp.Proxy)
	}
	code, body := proxiedGet(t, resp.Proxy, "http://pypi.test/simple/")
	if code != 200 || body != "kind=egress host=pypi.test peer-is-loopback=true" {
		t.Fatalf("through the proxy: %d %q", code, body)
	}

	// Every command started from now on has the proxy and the bundle.
	out, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", `echo "$HTTP_PROXY|$https_proxy|$ALL_PROXY|$NO_PROXY|$SSL_CERT_FILE|$PIP_CERT|$NODE_EXTRA_CA_CERTS|$GIT_SSL_CAINFO|$REQUESTS_CA_BUNDLE"`}})
	if err != nil {
		t.Fatal(err)
	}
	p, b := resp.Proxy, resp.CABundle
	want := strings.Join([]string{p, p, p, "localhost,127.0.0.1,::1", b, b, b, b, b}, "|")
	if got := strings.TrimSpace(string(out.Stdout)); got != want {
		t.Fatalf("a command's variables:\n got %s\nwant %s", got, want)
	}
	bundle, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	sys, _ := os.ReadFile(system)
	if !strings.Contains(string(bundle), strings.TrimSpace(ca)) || !strings.Contains(string(bundle), "BEGIN CERTIFICATE") || strings.Count(string(bundle), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("the bundle %s holds %d certificates, want the system's one and the CA", b, strings.Count(string(bundle), "BEGIN CERTIFICATE"))
	}
	if !resp.SystemBundle || !strings.Contains(string(sys), strings.TrimSpace(ca)) {
		t.Fatalf("the CA was not added to the writable system bundle (reported %v)", resp.SystemBundle)
	}
	fi, err := os.Stat(b)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		t.Fatalf("the bundle is not readable by every user: %v %v", fi.Mode(), err)
	}

	// Enabling it again (a new session does) keeps the port and adds the
	// CA to the system bundle only once.
	again, err := c.Egress(ctx, ca)
	if err != nil {
		t.Fatal(err)
	}
	sys, _ = os.ReadFile(system)
	if again.Proxy != resp.Proxy || strings.Count(string(sys), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("again: proxy %s (was %s), %d certificates in the system bundle", again.Proxy, resp.Proxy, strings.Count(string(sys), "BEGIN CERTIFICATE"))
	}
}

func TestEgressRefusesWhatIsNotOneCACertificate(t *testing.T) {
	_, c, _, _ := egressPair(t)
	ctx := testCtx(t)
	for _, bad := range []string{"not pem", testCA(t, "a") + testCA(t, "b")} {
		_, err := c.Egress(ctx, bad)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "PEM") {
			t.Fatalf("CA %.20q: %v, want the invalid-argument sentence", bad, err)
		}
	}
}

// A connection made while no session carries egress waits for the next
// session, and is told why when none comes.
func TestEgressConnectionWaitsForTheNextSession(t *testing.T) {
	srv, c, _, _ := egressPair(t, daemon.WithEgressWaitForTest(3*time.Second))
	ctx := testCtx(t)
	c.HandleIncoming(answerAsProxy)
	resp, err := c.Egress(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	time.Sleep(100 * time.Millisecond)

	type result struct {
		code int
		body string
	}
	got := make(chan result, 1)
	go func() {
		code, body := proxiedGet(t, resp.Proxy, "http://late.test/")
		got <- result{code, body}
	}()
	time.Sleep(300 * time.Millisecond)
	c2 := connect(t, srv)
	c2.HandleIncoming(answerAsProxy)
	if _, err := c2.Egress(ctx, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.code != 200 || !strings.Contains(r.body, "host=late.test") {
			t.Fatalf("the waiting connection: %d %q", r.code, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was not carried by the new session")
	}

	c2.Close()
	code, body := proxiedGet(t, resp.Proxy, "http://nobody.test/")
	if code != 503 || !strings.Contains(body, "not connected to sandboxd") {
		t.Fatalf("with no session: %d %q, want 503 and the sentence", code, body)
	}
}

// A restarted daemon listens on the port the commands were told at once.
func TestEgressResumesOnTheRecordedPort(t *testing.T) {
	srv, c, state, system := egressPair(t)
	ctx := testCtx(t)
	resp, err := c.Egress(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv2, c2 := startPair(t, daemon.WithStateDir(state), daemon.WithSystemBundle(system))
	_ = srv2
	out, err := c2.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", `echo "$HTTPS_PROXY"`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out.Stdout)); got != resp.Proxy {
		t.Fatalf("after a restart a command has HTTPS_PROXY=%q, want %q", got, resp.Proxy)
	}
	c2.HandleIncoming(answerAsProxy)
	if _, err := c2.Egress(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if code, body := proxiedGet(t, resp.Proxy, "http://back.test/"); code != 200 || !strings.Contains(body, "host=back.test") {
		t.Fatalf("after a restart: %d %q", code, body)
	}
}

// A client that serves no incoming streams closes them: the program sees
// its connection end, and nothing else is disturbed.
func TestEgressWithoutHandlerClosesTheStream(t *testing.T) {
	_, c, _, _ := egressPair(t)
	ctx := testCtx(t)
	resp, err := c.Egress(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(resp.Proxy)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	if _, err := hc.Get("http://x.test/"); err == nil {
		t.Fatal("a GET through a client that serves no egress succeeded")
	}
	if _, err := c.Stat(ctx, &proto.StatRequest{Root: t.TempDir(), Path: "."}); err != nil {
		t.Fatalf("the session broke: %v", err)
	}
}
