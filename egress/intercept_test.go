package egress

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
	"time"
)

const secretValue = "s3cr3t-VALUE-0123456789abcdef"

func bearer(hosts ...string) Secret {
	var rules []Rule
	for _, h := range hosts {
		r, err := ParseRule(h)
		if err != nil {
			panic(err)
		}
		rules = append(rules, r)
	}
	return Secret{Name: "pypi-token", Hosts: rules, Format: "Bearer {}", Value: func() (string, error) { return secretValue + "\n", nil }}
}

// echo answers with the Authorization header it received, in a response
// header and in the body, as a careless or hostile server might.
func echo(seen chan<- *http.Request) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r:
		default:
		}
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "you sent %s to %s", r.Header.Get("Authorization"), r.Host)
	}
}

func TestInterceptInjectsBearer(t *testing.T) {
	seen := make(chan *http.Request, 4)
	_, port := tlsServer(t, echo(seen))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), []Secret{bearer("pypi.test")})
	_, ca := authorities(t)
	c, tr := f.client(ca) // trusts the proxy's authority only
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://pypi.test:%d/simple/", port), nil)
	req.Header.Set("Authorization", "Bearer made-up-by-the-sandbox")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dump, _ := httputil.DumpResponse(resp, true)
	resp.Body.Close()
	select {
	case r := <-seen:
		if got := r.Header.Get("Authorization"); got != "Bearer "+secretValue {
			t.Errorf("the upstream received Authorization %q, want the secret (and not the sandbox's own value)", got)
		}
		if n := len(r.Header.Values("Authorization")); n != 1 {
			t.Errorf("the upstream received %d Authorization headers, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream saw no request")
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %s: %s", resp.Status, dump)
	}
	if strings.Contains(string(dump), secretValue) {
		t.Errorf("the client received the secret:\n%s", dump)
	}
	if !strings.Contains(resp.Header.Get("X-Echo"), redactedMark) {
		t.Errorf("the echoed header reads %q, want it redacted", resp.Header.Get("X-Echo"))
	}
	leaf := resp.TLS.PeerCertificates[0]
	if err := leaf.CheckSignatureFrom(ca.Certificate()); err != nil {
		t.Errorf("the client's certificate was not signed by the proxy's authority: %v", err)
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "pypi.test" || leaf.NotAfter.Sub(leaf.NotBefore) > 8*24*time.Hour {
		t.Errorf("leaf names %v and lives %s, want pypi.test for at most about 7 days", leaf.DNSNames, leaf.NotAfter.Sub(leaf.NotBefore))
	}
	if resp.TLS.NegotiatedProtocol != "" && resp.TLS.NegotiatedProtocol != "http/1.1" {
		t.Errorf("ALPN negotiated %q, want http/1.1", resp.TLS.NegotiatedProtocol)
	}
	tr.CloseIdleConnections()
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "intercept" })
	if !d.Allowed || d.Host != "pypi.test" || d.Port != port || len(d.Secrets) != 1 || d.Secrets[0] != "pypi-token" || d.Addr != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("intercept decision %+v, want allowed with secret pypi-token", d)
	}
	f.waitDecision(func(d Decision) bool { return d.Kind == "connect" })
	for _, d := range f.allDecisions() {
		if strings.Contains(fmt.Sprintf("%+v", d), secretValue) {
			t.Errorf("a decision holds the secret: %+v", d)
		}
	}
}

func TestInterceptBasicAuthKeepAlive(t *testing.T) {
	seen := make(chan *http.Request, 4)
	_, port := tlsServer(t, echo(seen))
	s := bearer("pypi.test")
	s.Name, s.Basic, s.BasicUser = "git", true, "git"
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), []Secret{s})
	_, ca := authorities(t)
	c, tr := f.client(ca)
	for i := range 2 {
		resp, err := c.Get(fmt.Sprintf("https://pypi.test:%d/repo.git/info/refs?n=%d", port, i))
		if err != nil {
			t.Fatal(err)
		}
		dump, _ := httputil.DumpResponse(resp, true)
		resp.Body.Close()
		r := <-seen
		if u, p, ok := r.BasicAuth(); !ok || u != "git" || p != secretValue {
			t.Errorf("request %d: the upstream received basic auth %q/%q (%v), want git and the secret", i, u, p, ok)
		}
		enc := base64.StdEncoding.EncodeToString([]byte("git:" + secretValue))
		if strings.Contains(string(dump), secretValue) || strings.Contains(string(dump), enc) {
			t.Errorf("the client received the secret:\n%s", dump)
		}
	}
	tr.CloseIdleConnections()
	ds := f.waitCount(2, func(d Decision) bool { return d.Kind == "intercept" })
	for _, d := range ds {
		if !d.Allowed || len(d.Secrets) != 1 || d.Secrets[0] != "git" {
			t.Errorf("decision %+v, want allowed with secret git", d)
		}
	}
}

func TestInterceptUntrustedUpstream(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	cfg := baseConfig(t)
	cfg.RootCAs = x509.NewCertPool() // trusts nothing
	f := newFixture(t, cfg, mustLayered(t, "pypi.test", "127.0.0.0/8"), []Secret{bearer("pypi.test")})
	_, ca := authorities(t)
	c, _ := f.client(ca)
	resp, err := c.Get(fmt.Sprintf("https://pypi.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkRefusal(t, resp, string(body), 502, fmt.Sprintf("sandboxd: the server at pypi.test:%d presented a certificate signed by an authority the proxy does not trust; ask the operator to add its CA to egress.ca_files.", port))
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "intercept" })
	if d.Allowed || d.Reason != "the upstream's certificate is signed by an unknown authority" {
		t.Errorf("decision %+v, want refused for the unknown authority", d)
	}
}

func TestInterceptHostMismatch(t *testing.T) {
	_, port := tlsServer(t, http.HandlerFunc(hello))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "other.test", "127.0.0.0/8"), []Secret{bearer("pypi.test")})
	_, ca := authorities(t)
	c, _ := f.client(ca)
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://pypi.test:%d/", port), nil)
	req.Host = "other.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkRefusal(t, resp, string(body), 403, fmt.Sprintf(`sandboxd: the request's Host "other.test" is not pypi.test:%d, the host this tunnel was opened for; a tunnel carries requests for its own host only.`, port))
}

func TestInterceptWithoutAuthority(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Authority = nil
	f := newFixture(t, cfg, mustLayered(t, "pypi.test"), []Secret{bearer("pypi.test")})
	resp, body, _, _ := f.rawRequest("CONNECT pypi.test:443 HTTP/1.1\r\n\r\n")
	checkRefusal(t, resp, body, 503, "sandboxd: the secret pypi-token is set for pypi.test:443, but this deployment has no certificate authority to add it to HTTPS requests; ask the operator to configure one.")
}

func TestPlainHTTPInjects(t *testing.T) {
	seen := make(chan *http.Request, 4)
	_, port := plainServer(t, echo(seen))
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), []Secret{bearer("pypi.test")})
	c, _ := f.client()
	resp, err := c.Get(fmt.Sprintf("http://pypi.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	dump, _ := httputil.DumpResponse(resp, true)
	resp.Body.Close()
	if r := <-seen; r.Header.Get("Authorization") != "Bearer "+secretValue {
		t.Errorf("the upstream received Authorization %q", r.Header.Get("Authorization"))
	}
	if strings.Contains(string(dump), secretValue) {
		t.Errorf("the client received the secret:\n%s", dump)
	}
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "http" })
	if len(d.Secrets) != 1 || d.Secrets[0] != "pypi-token" {
		t.Errorf("decision %+v, want secret pypi-token", d)
	}
}

func TestMaskReaderAcrossReads(t *testing.T) {
	needle := []byte(secretValue)
	text := "start " + secretValue + " middle " + secretValue + " end"
	for _, chunk := range []int{1, 3, 7, len(secretValue) - 1, 1 << 10} {
		r := newMaskReader(io.NopCloser(&chunkReader{s: text, n: chunk}), [][]byte{needle})
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(text, secretValue, strings.Repeat("*", len(secretValue)))
		if string(got) != want {
			t.Errorf("chunks of %d: %q, want %q", chunk, got, want)
		}
	}
}

type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
}
