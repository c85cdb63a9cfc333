package egress

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// benchGET fetches a small object over HTTPS through the gate on loopback,
// a new proxy connection and tunnel per request, as a command-line tool
// such as curl or pip does.
func benchGET(b *testing.B, secrets []Secret) {
	_, port := tlsServer(b, http.HandlerFunc(hello))
	f := newFixture(b, baseConfig(b), mustLayered(b, "pypi.test", "127.0.0.0/8"), secrets)
	up, ca := authorities(b)
	c, tr := f.client(up, ca)
	tr.DisableKeepAlives = true
	url := fmt.Sprintf("https://pypi.test:%d/obj", port)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %s", resp.Status)
		}
	}
}

// BenchmarkTunnelGET: a new CONNECT tunnel per GET, spliced untouched.
func BenchmarkTunnelGET(b *testing.B) { benchGET(b, nil) }

// BenchmarkInterceptGET: a new tunnel per GET, TLS terminated with a
// cached leaf, a secret set, and a new verified TLS connection upstream.
func BenchmarkInterceptGET(b *testing.B) { benchGET(b, []Secret{bearer("pypi.test")}) }
