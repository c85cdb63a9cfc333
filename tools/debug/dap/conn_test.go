package dap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAdapter is the far end of a pipe: it reads our requests and writes
// what the test tells it to. The real adapters are exercised by the debug
// package's Docker tests; this covers protocol corners they cannot force.
type fakeAdapter struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func newPair(t *testing.T, h Handler) (*Conn, *fakeAdapter) {
	t.Helper()
	a, b := net.Pipe()
	c := NewConn(a, h)
	t.Cleanup(func() { c.Close(); b.Close() })
	return c, &fakeAdapter{t: t, conn: b, br: bufio.NewReader(b)}
}

func (f *fakeAdapter) read() *Message {
	f.t.Helper()
	f.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	m, err := readMessage(f.br)
	if err != nil {
		f.t.Fatalf("fake adapter read: %v", err)
	}
	return m
}

func (f *fakeAdapter) send(raw string) {
	f.t.Helper()
	f.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(f.conn, "Content-Length: %d\r\n\r\n%s", len(raw), raw); err != nil {
		f.t.Fatalf("fake adapter write: %v", err)
	}
}

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(m *Message) {
	r.mu.Lock()
	r.events = append(r.events, m.Event)
	r.mu.Unlock()
}

func (r *recorder) ReverseRequest(m *Message) (any, error) {
	if m.Command == "runInTerminal" {
		return nil, errors.New("no terminal here")
	}
	return map[string]any{"ok": true}, nil
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// Custom events go-dap does not know are delivered, not fatal, and a
// response is matched to its request even when responses come out of order.
func TestUnknownEventsAndOutOfOrderResponses(t *testing.T) {
	rec := &recorder{}
	c, f := newPair(t, rec)
	// net.Pipe is unbuffered: the fake reads each request as it is sent.
	reqs := make(chan *Message, 2)
	go func() { reqs <- f.read(); reqs <- f.read() }()
	p1, err := c.Start(ctx(t), "launch", map[string]any{"program": "x"})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.Start(ctx(t), "threads", nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := <-reqs, <-reqs
	if r1.Command != "launch" || r2.Command != "threads" || r2.Seq <= r1.Seq {
		t.Fatalf("requests %+v %+v", r1, r2)
	}
	f.send(`{"seq":1,"type":"event","event":"debugpyWaitingForServer","body":{"host":"127.0.0.1"}}`)
	f.send(`{"seq":2,"type":"event","event":"initialized"}`)
	f.send(fmt.Sprintf(`{"seq":3,"type":"response","request_seq":%d,"command":"threads","success":true,"body":{"threads":[{"id":1,"name":"main"}]}}`, r2.Seq))
	m, err := p2.Wait(ctx(t))
	if err != nil || !strings.Contains(string(m.Body), `"main"`) {
		t.Fatalf("threads: %v %s", err, m.Body)
	}
	f.send(fmt.Sprintf(`{"seq":4,"type":"response","request_seq":%d,"command":"launch","success":true}`, r1.Seq))
	if _, err := p1.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := rec.seen(); len(got) != 2 || got[0] != "debugpyWaitingForServer" || got[1] != "initialized" {
		t.Fatalf("events %v", got)
	}
}

// A reverse request gets a response: runInTerminal refused with the handler's
// reason, others with the handler's body.
func TestReverseRequestsAnswered(t *testing.T) {
	c, f := newPair(t, &recorder{})
	_ = c
	f.send(`{"seq":7,"type":"request","command":"runInTerminal","arguments":{"args":["python3"]}}`)
	m := f.read()
	if m.Type != "response" || m.RequestSeq != 7 || m.Success || m.Message != "no terminal here" {
		t.Fatalf("runInTerminal answer %+v", m)
	}
	f.send(`{"seq":8,"type":"request","command":"custom"}`)
	m = f.read()
	if !m.Success || m.RequestSeq != 8 || !strings.Contains(string(m.Body), "ok") {
		t.Fatalf("custom answer %+v", m)
	}
}

// A failed response becomes a ResponseError carrying the adapter's text,
// with format variables filled in.
func TestErrorResponse(t *testing.T) {
	c, f := newPair(t, nil)
	done := make(chan error, 1)
	go func() { done <- c.Do(ctx(t), "evaluate", map[string]any{"expression": "nope"}, nil) }()
	r := f.read()
	f.send(fmt.Sprintf(`{"seq":1,"type":"response","request_seq":%d,"command":"evaluate","success":false,"message":"evaluate failed","body":{"error":{"id":1,"format":"name {n} is not defined","variables":{"n":"nope"}}}}`, r.Seq))
	err := <-done
	var re *ResponseError
	if !errors.As(err, &re) || re.Text != "name nope is not defined" {
		t.Fatalf("error %v", err)
	}
}

// Every request has a deadline: no response is an error naming the command,
// and a closed connection fails what is pending.
func TestDeadlineAndClose(t *testing.T) {
	c, f := newPair(t, nil)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	read := make(chan *Message, 1)
	go func() { read <- f.read() }()
	err := c.Do(short, "stackTrace", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no answer to stackTrace") {
		t.Fatalf("deadline: %v", err)
	}
	<-read
	go func() { read <- f.read() }()
	p, err := c.Start(ctx(t), "continue", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-read
	f.conn.Close()
	if _, err := p.Wait(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("pending after close: %v", err)
	}
	if _, err := c.Start(ctx(t), "threads", nil); err == nil {
		t.Fatal("a request on a closed connection succeeded")
	}
}

// An oversized message ends the connection instead of allocating it.
func TestOversizedMessage(t *testing.T) {
	c, f := newPair(t, nil)
	go io.WriteString(f.conn, fmt.Sprintf("Content-Length: %d\r\n\r\n", MaxMessageBytes+1))
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open after an oversized header")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "cap") {
		t.Fatalf("err %v", err)
	}
}
