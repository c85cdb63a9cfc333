package ports

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// fakeSandbox stands for the agent's dial: the addresses it has reach
// the test's servers, any other is refused as the agent says it.
type fakeSandbox map[string]string // address in the sandbox -> real address

func (f fakeSandbox) dial(ctx context.Context, addr string) (net.Conn, error) {
	real, ok := f[addr]
	if !ok {
		return nil, errdefs.Unavailable("cannot connect to tcp %s: dial tcp %s: connect: connection refused; check that the server is listening", addr, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", real)
}

// front serves the proxy the way the API does, for port 3000 of
// sandbox sbx-a under /v1/sandboxes/sbx-a/ports/3000.
func front(t *testing.T, f fakeSandbox, port int) *httptest.Server {
	t.Helper()
	p := NewProxy()
	t.Cleanup(p.Close)
	prefix := fmt.Sprintf("/v1/sandboxes/sbx-a/ports/%d", port)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(w, r, Target{Sandbox: "sbx-a", Port: port, Dial: f.dial, StripPrefix: prefix, Mount: prefix,
			Fail: func(w http.ResponseWriter, status int, code, msg string) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
			}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func upstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestProxyPassesTheRequestWithoutTheTenantsCredentials(t *testing.T) {
	type seen struct {
		Path, Query, Host, Auth, Cookie, Fwd, Sig string
	}
	got := make(chan seen, 1)
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Sandboxd-Forward-Sig")}
		w.Header().Set("Location", "/login")
		w.WriteHeader(http.StatusFound)
	})
	fr := front(t, fakeSandbox{"127.0.0.1:3000": app}, 3000)
	req, _ := http.NewRequest("GET", fr.URL+"/v1/sandboxes/sbx-a/ports/3000/a/b%2Fc?x=1", nil)
	req.Header.Set("Authorization", "Bearer tenant-secret")
	req.Header.Set("Cookie", "theme=dark; "+CookieName+"=tok; sid=1")
	req.Header.Set("X-Sandboxd-Forward-Sig", "sig")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := <-got
	want := seen{Path: "/a/b/c", Query: "x=1", Host: "localhost:3000", Cookie: "theme=dark; sid=1", Fwd: strings.TrimPrefix(fr.URL, "http://")}
	if s != want {
		t.Fatalf("the app saw %+v; want %+v", s, want)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/sandboxes/sbx-a/ports/3000/login" {
		t.Fatalf("the app's redirect to /login came out as %q", loc)
	}
}

func TestProxyNothingListens(t *testing.T) {
	fr := front(t, fakeSandbox{}, 3000)
	resp, err := http.Get(fr.URL + "/v1/sandboxes/sbx-a/ports/3000/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), "nothing listens on port 3000 in sandbox sbx-a; start the server first, e.g. with the process tool") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// A server listening only on ::1 ("localhost" in recent Node) is reached.
func TestProxyFallsBackToIPv6Loopback(t *testing.T) {
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "six") })
	fr := front(t, fakeSandbox{"[::1]:3000": app}, 3000)
	resp, err := http.Get(fr.URL + "/v1/sandboxes/sbx-a/ports/3000/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "six" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// Server-sent events arrive as the app sends them: the first event is
// read while the app still waits to send the second.
func TestProxyStreamsEvents(t *testing.T) {
	next := make(chan struct{})
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(10 * time.Second):
				return
			}
		}
	})
	fr := front(t, fakeSandbox{"127.0.0.1:3000": app}, 3000)
	resp, err := http.Get(fr.URL + "/v1/sandboxes/sbx-a/ports/3000/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
}

// An Upgrade is spliced: bytes go both ways in order once the app said 101.
func TestProxySplicesUpgrades(t *testing.T) {
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw)
	})
	fr := front(t, fakeSandbox{"127.0.0.1:3000": app}, 3000)
	c, err := net.Dial("tcp", strings.TrimPrefix(fr.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET /v1/sandboxes/sbx-a/ports/3000/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	go func() {
		for i := range 1000 {
			fmt.Fprintf(c, "message %d\n", i)
		}
	}()
	for i := range 1000 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("message %d\n", i) {
			t.Fatalf("echo %d: %q %v", i, line, err)
		}
	}
}

// A sandbox without IPv6 answers the ::1 attempt with another error; the
// refusal on 127.0.0.1 still reads as nothing listening.
func TestProxyNothingListensWithoutIPv6(t *testing.T) {
	p := NewProxy()
	defer p.Close()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "[::1]") {
			return nil, errdefs.Unavailable("cannot connect to tcp %s: connect: cannot assign requested address", addr)
		}
		return fakeSandbox{}.dial(ctx, addr)
	}
	var status int
	var msg string
	w := httptest.NewRecorder()
	p.Serve(w, httptest.NewRequest("GET", "/", nil), Target{Sandbox: "sbx-a", Port: 3000, Dial: dial,
		Fail: func(_ http.ResponseWriter, s int, _, m string) { status, msg = s, m }})
	if status != 502 || !strings.HasPrefix(msg, "nothing listens on port 3000") {
		t.Fatalf("%d %s", status, msg)
	}
}
