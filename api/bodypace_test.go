package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// pacedServer is the API with a short body timeout and a tool that runs
// for several times that long.
func pacedServer(t *testing.T, timeout time.Duration) *httptest.Server {
	t.Helper()
	reg := newRegistry()
	reg.Register(&testTool{
		spec: tools.Spec{Name: "nap", Description: "runs longer than a body may take", Level: tools.LevelRead, ParallelSafe: true},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			select {
			case <-time.After(4 * timeout):
				return tools.Text("rested"), nil
			case <-ctx.Done():
				return tools.Result{}, ctx.Err()
			}
		},
	})
	a, _ := ParseTenantToken("a", HashToken(tokenA))
	srv := httptest.NewServer(New(newLeaky(), reg, NewTokenAuth(a), WithBodyTimeout(timeout)))
	t.Cleanup(srv.Close)
	return srv
}

// trickle sends a request's head and then its body a byte at a time, every
// gap, until the server responds or closes; it returns what the server sent.
func trickle(t *testing.T, addr, head, body string, gap time.Duration) (status int, answer string, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Every wait of this test is bounded by this deadline.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), closedByPeer(br)
}

// closedByPeer reports whether the server closed the connection: the next
// read ends in EOF, or in a reset when the server closed with body bytes
// still unread; a timeout (the connection's deadline) means it stayed open.
func closedByPeer(br *bufio.Reader) bool {
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A body trickled a byte at a time is cut off at its deadline with a 400
// that says so, and the connection is closed; the same holds for a chunked
// body.
func TestSlowBodyIsRefused(t *testing.T) {
	srv := pacedServer(t, 500*time.Millisecond)
	addr := srv.Listener.Addr().String()
	body := `{"conversation":"c1"}` + strings.Repeat(" ", 100)
	heads := map[string]string{
		"content-length": fmt.Sprintf("POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", tokenA, len(body)),
	}
	for name, head := range heads {
		status, answer, closed := trickle(t, addr, head, body, 100*time.Millisecond)
		if status != 400 || !strings.Contains(answer, "request body arrived too slowly") || !strings.Contains(answer, "invalid_argument") {
			t.Errorf("%s: %d %s", name, status, answer)
		}
		if !closed {
			t.Errorf("%s: the connection stayed open after the answer", name)
		}
	}
	// Chunked: each byte its own chunk.
	chunked := ""
	for _, c := range []byte(body) {
		chunked += fmt.Sprintf("1\r\n%c\r\n", c)
	}
	chunked += "0\r\n\r\n"
	head := fmt.Sprintf("POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n", tokenA)
	status, answer, closed := trickle(t, addr, head, chunked, 20*time.Millisecond)
	if status != 400 || !strings.Contains(answer, "arrived too slowly") || !closed {
		t.Errorf("chunked: %d %s closed=%v", status, answer, closed)
	}
}

// Once the body is in, the request has no deadline: a tool call that runs
// several times the body timeout finishes, and the connection serves the
// next request.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	srv := pacedServer(t, 300*time.Millisecond)
	c := srv.Client()
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenA)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, answer := do("POST", "/v1/runs", `{"conversation":"c1"}`)
	if status != 201 {
		t.Fatalf("run: %d %s", status, answer)
	}
	var run Run
	json.Unmarshal([]byte(answer), &run)
	for i := 0; i < 2; i++ { // the second call reuses the connection
		status, answer = do("POST", "/v1/runs/"+run.ID+"/tools/nap", `{}`)
		if status != 200 || !strings.Contains(answer, "rested") {
			t.Fatalf("call %d: %d %s", i, status, answer)
		}
	}
}
