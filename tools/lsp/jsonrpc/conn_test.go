package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePeer is the other end of a pipe speaking the framing by hand.
type fakePeer struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
	mu sync.Mutex // guards writes to c
}

func newPair(t *testing.T, h Handler) (*Conn, *fakePeer) {
	a, b := net.Pipe()
	c := New(a, h)
	t.Cleanup(func() { c.Close(); b.Close() })
	return c, &fakePeer{t: t, c: b, br: bufio.NewReader(b)}
}

func (p *fakePeer) read() *message {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	m, err := readMessage(p.br)
	if err != nil {
		p.t.Fatalf("peer read: %v", err)
	}
	return m
}

func (p *fakePeer) send(v any) {
	p.t.Helper()
	b, _ := json.Marshal(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.c, "Content-Length: %d\r\n\r\n%s", len(b), b)
}

type recorder struct {
	mu     sync.Mutex // guards notes
	notes  []string
	answer func(method string, params json.RawMessage) (any, error)
}

func (r *recorder) Notify(method string, params json.RawMessage) {
	r.mu.Lock()
	r.notes = append(r.notes, method+" "+string(params))
	r.mu.Unlock()
}

func (r *recorder) Request(_ context.Context, method string, params json.RawMessage) (any, error) {
	return r.answer(method, params)
}

func TestCallsAnsweredOutOfOrder(t *testing.T) {
	c, peer := newPair(t, nil)
	type res struct {
		v   string
		err error
	}
	results := make(chan res, 2)
	for _, q := range []string{"first", "second"} {
		go func() {
			var out string
			err := c.Call(context.Background(), "echo", q, &out)
			results <- res{out, err}
		}()
	}
	m1, m2 := peer.read(), peer.read()
	// Respond to the later request first; each caller must get its own
	// response.
	for _, m := range []*message{m2, m1} {
		var q string
		json.Unmarshal(m.Params, &q)
		peer.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": "re:" + q})
	}
	got := map[string]bool{}
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		got[r.v] = true
	}
	if !got["re:first"] || !got["re:second"] {
		t.Errorf("answers = %v", got)
	}
}

func TestErrorAnswerAndServerRequests(t *testing.T) {
	rec := &recorder{answer: func(method string, params json.RawMessage) (any, error) {
		if method == "workspace/configuration" {
			return []any{nil}, nil
		}
		return nil, &Error{Code: CodeMethodNotFound, Message: "no " + method}
	}}
	c, peer := newPair(t, rec)
	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "broken", nil, nil) }()
	m := peer.read()
	peer.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "error": map[string]any{"code": -32602, "message": "bad params"}})
	var rpc *Error
	if err := <-errc; !errors.As(err, &rpc) || rpc.Code != -32602 || rpc.Message != "bad params" {
		t.Errorf("error answer = %v", err)
	}
	// The server asks us things, with string ids too.
	peer.send(map[string]any{"jsonrpc": "2.0", "id": "cfg-1", "method": "workspace/configuration", "params": map[string]any{"items": []any{map[string]any{}}}})
	peer.send(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "unknown/thing"})
	answers := map[string]*message{}
	for range 2 {
		m := peer.read()
		answers[string(m.ID)] = m
	}
	if a := answers[`"cfg-1"`]; a == nil || string(a.Result) != "[null]" {
		t.Errorf("configuration answer = %+v", a)
	}
	if a := answers["7"]; a == nil || a.Error == nil || a.Error.Code != CodeMethodNotFound {
		t.Errorf("unknown request answer = %+v", a)
	}
}

func TestNotificationsInOrder(t *testing.T) {
	rec := &recorder{}
	c, peer := newPair(t, rec)
	for i := range 50 {
		peer.send(map[string]any{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": map[string]int{"n": i}})
	}
	// A round trip after the notifications proves they were all dispatched.
	go func() {
		m := peer.read()
		peer.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": nil})
	}()
	if err := c.Call(context.Background(), "sync", nil, nil); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.notes) != 50 {
		t.Fatalf("got %d notifications, want 50", len(rec.notes))
	}
	for i, n := range rec.notes {
		if want := fmt.Sprintf(`textDocument/publishDiagnostics {"n":%d}`, i); n != want {
			t.Fatalf("notification %d = %s, want %s", i, n, want)
		}
	}
}

func TestCancelAndClose(t *testing.T) {
	c, peer := newPair(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctx, "slow", nil, nil) }()
	m := peer.read()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if cm := peer.read(); cm.Method != "$/cancelRequest" || !strings.Contains(string(cm.Params), string(m.ID)) {
		t.Errorf("after cancel the peer got %s %s, want $/cancelRequest for %s", cm.Method, cm.Params, m.ID)
	}
	// The peer goes away: pending calls end with ErrClosed, new ones too.
	go func() { errc <- c.Call(context.Background(), "pending", nil, nil) }()
	peer.read()
	peer.c.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("pending call after close: %v", err)
	}
	<-c.Done()
	if err := c.Call(context.Background(), "late", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close: %v", err)
	}
}

func TestBadFramesEndTheConnection(t *testing.T) {
	for name, frame := range map[string]string{
		"huge length":  fmt.Sprintf("Content-Length: %d\r\n\r\n", MaxMessageBytes+1),
		"not a number": "Content-Length: ten\r\n\r\n",
		"not json":     "Content-Length: 3\r\n\r\nabc",
	} {
		t.Run(name, func(t *testing.T) {
			c, peer := newPair(t, nil)
			go io.WriteString(peer.c, frame)
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("a bad frame did not end the connection")
			}
			if !errors.Is(c.Err(), ErrClosed) {
				t.Errorf("Err = %v", c.Err())
			}
		})
	}
}

func TestWedgedPeerDoesNotBlockWriters(t *testing.T) {
	a, b := net.Pipe() // net.Pipe supports write deadlines; nobody reads b
	defer b.Close()
	c := New(a, nil)
	c.writeTimeout = 100 * time.Millisecond
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Notify("textDocument/didChange", map[string]string{"text": "x"}) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("write to a wedged peer: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write to a peer that never reads did not time out")
	}
}
