package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/ports"
)

// portsBox is a Docker sandbox running testdata/portsrv.py on some ports.
type portsBox struct {
	ID  string
	run string
}

// startPortsBox creates a sandbox for conv and starts the test app on each
// port, marked mark-port, detached from the shell call so it outlives it.
func startPortsBox(t *testing.T, d *daemon, conv string, ports ...int) portsBox {
	t.Helper()
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", conv))
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/portsrv.py")
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "portsrv.py", "content": string(src)})
	b := portsBox{ID: sb.ID, run: run.ID}
	for _, p := range ports {
		cmd := fmt.Sprintf("setsid nohup python3 portsrv.py %d %s-%d > /tmp/portsrv-%d.log 2>&1 < /dev/null & echo started", p, conv, p, p)
		if code, out := shellOut(t, d, run.ID, cmd, 30); code != 0 {
			t.Fatalf("starting the app on %d: %s", p, out)
		}
	}
	waitFor(t, 30*time.Second, "the apps listen", func() error {
		got := listPorts(t, d, sb.ID)
		for _, p := range ports {
			found := false
			for _, l := range got {
				found = found || l.Port == p
			}
			if !found {
				return fmt.Errorf("port %d not listed in %+v", p, got)
			}
		}
		return nil
	})
	return b
}

func authed(t *testing.T, d *daemon, method, path string, body any) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx(t), method, d.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// do sends req through the contract check (the /v1 JSON endpoints).
func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b
}

// appClient reaches the apps (the proxy and the previews): their answers
// are the apps', which no contract describes.
var appClient = &http.Client{Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := appClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(b)
}

func listPorts(t *testing.T, d *daemon, id string) []proto.ListeningPort {
	t.Helper()
	code, b := do(t, authed(t, d, "GET", "/v1/sandboxes/"+id+"/ports", nil))
	if code != 200 {
		t.Fatalf("GET ports: %d %s", code, b)
	}
	var out []proto.ListeningPort
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func createPreview(t *testing.T, d *daemon, id string, body map[string]any) ports.Preview {
	t.Helper()
	code, b := do(t, authed(t, d, "POST", "/v1/sandboxes/"+id+"/previews", body))
	if code != 201 {
		t.Fatalf("POST previews %v: %d %s", body, code, b)
	}
	var p ports.Preview
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func plain(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestPortsAndPreviews drives a Python app in two Docker sandboxes through
// the port proxy and preview links: pages and their sub-resources, events,
// a WebSocket echo, the refusals, and that a link reaches only its own
// sandbox and port.
func TestPortsAndPreviews(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	d := startDaemon(t, "docker", t.TempDir())
	a := startPortsBox(t, d, "ports-a", 3000, 3001)
	b := startPortsBox(t, d, "ports-b", 3000)

	// The listing names the process.
	for _, l := range listPorts(t, d, a.ID) {
		if l.Port == 3000 && (l.PID == 0 || !strings.Contains(l.Command, "portsrv.py 3000")) {
			t.Errorf("port 3000 listed as %+v; want the python process", l)
		}
	}

	// The port proxy, with the tenant's token.
	base := "/v1/sandboxes/" + a.ID + "/ports/3000"
	if code, body := get(t, authed(t, d, "GET", base+"/", nil)); code != 200 || !strings.Contains(body, "<title>ports-a-3000</title>") || len(body) != 4096 {
		t.Fatalf("GET through the proxy: %d (%d bytes) %.200s", code, len(body), body)
	}
	if code, body := get(t, authed(t, d, "GET", base+"/headers", nil)); code != 200 || strings.Contains(body, d.Token) || strings.Contains(strings.ToLower(body), "authorization") {
		t.Fatalf("the app saw the tenant's token: %s", body)
	}
	up := authed(t, d, "POST", base+"/upload", nil)
	up.Body, up.ContentLength = io.NopCloser(bytes.NewReader(make([]byte, 5<<20))), 5<<20
	if code, body := get(t, up); code != 200 || body != "got 5242880 bytes" {
		t.Fatalf("POST 5 MiB through the proxy: %d %s", code, body)
	}
	if code, body := get(t, plain(t, "GET", d.URL+base+"/")); code != 401 {
		t.Fatalf("the proxy without a token: %d %.200s", code, body)
	}
	for path, want := range map[string]string{
		"/v1/sandboxes/" + a.ID + "/ports/3999/":    "nothing listens on port 3999 in sandbox " + a.ID + "; start the server first, e.g. with the process tool",
		"/v1/sandboxes/" + a.ID + "/ports/0/":       "outside 1–65535",
		"/v1/sandboxes/" + a.ID + "/ports/70000/":   "outside 1–65535",
		"/v1/sandboxes/" + a.ID + "/ports/http/":    "is not a number",
		"/v1/sandboxes/no-such-sandbox/ports/3000/": "does not exist",
	} {
		code, body := get(t, authed(t, d, "GET", path, nil))
		if code < 400 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %s; want an error saying %q", path, code, body, want)
		}
	}

	// A preview link, without the token: the page, its script and fetch.
	p := createPreview(t, d, a.ID, map[string]any{"port": 3000})
	if p.Port != 3000 || !strings.HasPrefix(p.URL, d.URL+"/p/") || time.Until(p.ExpiresAt) < 59*time.Minute {
		t.Fatalf("preview %+v", p)
	}
	for path, want := range map[string]string{"": "<title>ports-a-3000</title>", "app.js": "fetch('data.json')", "data.json": `"mark": "ports-a-3000"`} {
		if code, body := get(t, plain(t, "GET", p.URL+path)); code != 200 || !strings.Contains(body, want) {
			t.Errorf("preview GET %q: %d %.200s", path, code, body)
		}
	}

	// Server-sent events arrive one by one, not at the end: each carries
	// the time the app sent it (the sandbox shares the host's clock), and
	// most arrive before the last is sent. A proxy that held the stream
	// back would hand them all over after it; a hiccup of the machine at
	// the start delays only the first ones.
	resp, err := appClient.Do(plain(t, "GET", p.URL+"events"))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var arrived []time.Time
	var sent []float64
	for len(arrived) < 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(arrived), err)
		}
		var n int
		var at float64
		if _, err := fmt.Sscanf(line, "data: %d %f", &n, &at); err == nil {
			arrived, sent = append(arrived, time.Now()), append(sent, at)
		}
	}
	resp.Body.Close()
	last := time.Unix(0, int64(sent[4]*1e9))
	early := 0
	for _, a := range arrived[:4] {
		if a.Before(last) {
			early++
		}
	}
	if early < 2 {
		t.Errorf("%d of the first 4 events (sent 0.3 s apart) arrived before the 5th was sent, at %v: they were held back", early, arrived)
	}

	// A WebSocket echo through the preview: 10,000 messages, in order.
	wsURL := "ws" + strings.TrimPrefix(p.URL, "http") + "ws"
	ws, _, err := websocket.DefaultDialer.DialContext(ctx(t), wsURL, nil)
	if err != nil {
		t.Fatalf("WebSocket through the preview: %v", err)
	}
	const echoes = 10000
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range echoes {
			if ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, "message %d", i)) != nil {
				return
			}
		}
	}()
	ws.SetReadDeadline(time.Now().Add(120 * time.Second))
	for i := range echoes {
		_, m, err := ws.ReadMessage()
		if err != nil || string(m) != fmt.Sprintf("message %d", i) {
			t.Fatalf("echo %d: %q %v", i, m, err)
		}
	}

	<-wrote // one writer at a time on a WebSocket

	// The link reaches only its sandbox and port: the token names both,
	// and a token altered to name another is refused.
	tok := strings.TrimSuffix(strings.TrimPrefix(p.URL, d.URL+ports.PathPrefix), "/")
	c, _ := ports.Peek(tok)
	for _, other := range []ports.Claims{{ID: c.ID, Tenant: c.Tenant, Sandbox: b.ID, Port: 3000, Expires: c.Expires}, {ID: c.ID, Tenant: c.Tenant, Sandbox: a.ID, Port: 3001, Expires: c.Expires}} {
		payload, _ := json.Marshal(other)
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		forged := "p1." + base64URL(payload) + "." + sig
		code, body := get(t, plain(t, "GET", d.URL+ports.PathPrefix+forged+"/"))
		if code != 403 || strings.Contains(body, "ports-b") || strings.Contains(body, "3001") {
			t.Errorf("a link altered to %s:%d: %d %.200s; want 403", other.Sandbox, other.Port, code, body)
		}
	}
	if code, body := get(t, plain(t, "GET", p.URL+"../../v1/sandboxes")); code == 200 && strings.Contains(body, a.ID) {
		t.Errorf("a preview path climbed out to the API: %.200s", body)
	}

	// Listing, revoking (at once, and the open WebSocket is cut).
	code, lb := do(t, authed(t, d, "GET", "/v1/sandboxes/"+a.ID+"/previews", nil))
	if code != 200 || !strings.Contains(string(lb), p.ID) {
		t.Fatalf("list: %d %s", code, lb)
	}
	if code, body := do(t, authed(t, d, "DELETE", "/v1/sandboxes/"+a.ID+"/previews/"+p.ID, nil)); code != 204 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if code, body := get(t, plain(t, "GET", p.URL)); code != 403 || !strings.Contains(body, "revoked") {
		t.Fatalf("a revoked link: %d %s", code, body)
	}
	// The revocation answered once the open WebSocket was cut: sandboxd
	// has closed it, with nothing sent by the client to notice.
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, m, err := ws.ReadMessage(); err == nil {
		t.Errorf("the WebSocket of a revoked link still answers: %q", m)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the WebSocket of a revoked link is still open 10 s after the revocation")
	}
	ws.WriteMessage(websocket.TextMessage, []byte("after"))
	if _, m, err := ws.ReadMessage(); err == nil {
		t.Errorf("the WebSocket of a revoked link still echoes: %q", m)
	}
	ws.Close()
	if code, body := do(t, authed(t, d, "DELETE", "/v1/sandboxes/"+a.ID+"/previews/"+p.ID, nil)); code != 204 {
		t.Fatalf("revoking again: %d %s", code, body)
	}
	if code, body := do(t, authed(t, d, "DELETE", "/v1/sandboxes/"+b.ID+"/previews/pvaaaaaaaaaaaaaaaa", nil)); code != 404 {
		t.Fatalf("revoking an unknown preview: %d %s", code, body)
	}

	// Expiry.
	short := createPreview(t, d, a.ID, map[string]any{"port": 3001, "ttl_s": 2})
	if code, body := get(t, plain(t, "GET", short.URL+"data.json")); code != 200 || !strings.Contains(body, "ports-a-3001") {
		t.Fatalf("a fresh short link: %d %s", code, body)
	}
	time.Sleep(time.Until(short.ExpiresAt) + 100*time.Millisecond)
	if code, body := get(t, plain(t, "GET", short.URL)); code != 403 || !strings.Contains(body, "expired") {
		t.Fatalf("an expired link: %d %s", code, body)
	}
	code, body := do(t, authed(t, d, "POST", "/v1/sandboxes/"+a.ID+"/previews", map[string]any{"port": 3000, "ttl_s": 999999999}))
	if code != 400 || !strings.Contains(string(body), "max_ttl") {
		t.Fatalf("a ttl over the max: %d %s", code, body)
	}

	// A restart keeps the revocation (the daemon comes back on another port).
	old := d.URL
	d.restart()
	if code, body := get(t, plain(t, "GET", strings.Replace(p.URL, old, d.URL, 1))); code != 403 || !strings.Contains(body, "revoked") {
		t.Fatalf("a revoked link after a restart: %d %s", code, body)
	}
	q := createPreview(t, d, b.ID, map[string]any{"port": 3000})
	if code, body := get(t, plain(t, "GET", q.URL+"data.json")); code != 200 || !strings.Contains(body, "ports-b-3000") {
		t.Fatalf("B's preview after a restart: %d %s", code, body)
	}
}

func base64URL(b []byte) string {
	return strings.TrimRight(base64.URLEncoding.EncodeToString(b), "=")
}
