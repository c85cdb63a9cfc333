package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The mounted API gets every path under /e2b/ and, whatever the path, the
// hosts it claims; everything else stays the API's.
func TestMountServesItsPrefixAndHosts(t *testing.T) {
	var built *Server
	mount := WithE2B(func(s *Server) http.Handler {
		built = s
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "mounted "+r.Host+" "+r.URL.Path)
		})
	}, func(host string) bool { return strings.HasSuffix(host, ".e2b.test") })
	h := newHarness(t, mount)
	if built != h.srv {
		t.Fatalf("the mount was built with %p, not the server %p", built, h.srv)
	}
	get := func(host, path string) (int, string) {
		req, err := http.NewRequest("GET", h.http.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("", "/e2b/sandboxes"); code != 200 || !strings.HasSuffix(body, " /e2b/sandboxes") {
		t.Errorf("GET /e2b/sandboxes: %d %q, want the mount's answer", code, body)
	}
	if code, body := get("8000-abc.e2b.test", "/v1/whoami"); code != 200 || body != "mounted 8000-abc.e2b.test /v1/whoami" {
		t.Errorf("a claimed host's /v1/whoami: %d %q, want the mount's answer", code, body)
	}
	if code, body := get("", "/v1/whoami"); code != http.StatusUnauthorized || strings.Contains(body, "mounted") {
		t.Errorf("GET /v1/whoami without a token: %d %q, want the API's 401", code, body)
	}
}
