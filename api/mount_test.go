package api

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The mounted API gets every path under /e2b/ and, whatever the path, the
// hosts it claims; everything else stays the API's.
func TestMountServesItsPrefixAndHosts(t *testing.T) {
	var built *Server
	mount := WithE2B(func(s *Server) http.Handler {
		built = s
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			SetRequestTenant(r.Context(), "a")
			io.WriteString(w, "mounted "+r.Host+" "+r.URL.Path)
		})
	}, func(r *http.Request) bool { return strings.HasSuffix(r.Host, ".e2b.test") })
	var logs syncBuffer
	h := newHarness(t, mount, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
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
	// The request log names the tenant the mount authenticated.
	if !strings.Contains(logs.String(), "tenant=a method=GET path=/e2b/sandboxes") {
		t.Errorf("the request log lacks the mount's tenant:\n%s", logs.String())
	}
}

// Requests into a sandbox through the mount (uploads, input streamed to a
// process) are not held to the body pace; its control requests are.
func TestMountSandboxBodiesAreNotPaced(t *testing.T) {
	mount := WithE2B(func(*Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, "cut: "+err.Error())
				return
			}
			io.WriteString(w, "read "+strconv.Itoa(len(b)))
		})
	}, nil)
	h := newHarness(t, mount, WithBodyTimeout(300*time.Millisecond))
	addr := h.http.Listener.Addr().String()
	body := strings.Repeat("x", 12)
	head := func(path string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", path, len(body))
	}
	// 12 bytes 100 ms apart: past the 300 ms pace.
	if status, answer, _ := trickle(t, addr, head("/e2b/sandbox/files"), body, 100*time.Millisecond); status != 200 || answer != "read 12" {
		t.Errorf("a slow upload into a sandbox: %d %q", status, answer)
	}
	if status, answer, _ := trickle(t, addr, head("/e2b/sandboxes"), body, 100*time.Millisecond); status == 200 {
		t.Errorf("a slow control body was taken: %d %q", status, answer)
	}
}
