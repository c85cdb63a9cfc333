package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// recordingConn records each Write that reaches the underlying stream.
type recordingConn struct {
	io.ReadWriteCloser
	// mu guards writes, fail and closed.
	mu     sync.Mutex
	writes [][]byte
	fail   error
	closed bool
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, bytes.Clone(p))
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return 0, fail
	}
	if r.ReadWriteCloser == nil {
		return len(p), nil
	}
	return r.ReadWriteCloser.Write(p)
}

func (r *recordingConn) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if r.ReadWriteCloser == nil {
		return nil
	}
	return r.ReadWriteCloser.Close()
}

func (r *recordingConn) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.writes...)
}

func yamuxHeader(typ uint8, flags uint16, id, n uint32) []byte {
	h := make([]byte, yamuxHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:], flags)
	binary.BigEndian.PutUint32(h[4:], id)
	binary.BigEndian.PutUint32(h[8:], n)
	return h
}

func TestCoalesceJoinsHeaderAndBody(t *testing.T) {
	rec := &recordingConn{}
	c := CoalesceWrites(rec, time.Hour)
	defer c.Close()
	syn := yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagSYN, 1, 1<<19)
	data := yamuxHeader(yamuxTypeData, 0, 1, 5)
	mustWrite(t, c, syn)
	mustWrite(t, c, data)
	if n := len(rec.got()); n != 0 {
		t.Fatalf("%d writes before the body came", n)
	}
	mustWrite(t, c, []byte("hello"))
	w := rec.got()
	want := append(append(bytes.Clone(syn), data...), "hello"...)
	if len(w) != 1 || !bytes.Equal(w[0], want) {
		t.Fatalf("writes %q, want one of %q", w, want)
	}
}

func TestCoalesceSendsFlowControlAtOnce(t *testing.T) {
	rec := &recordingConn{}
	c := CoalesceWrites(rec, time.Hour)
	defer c.Close()
	ack := yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagACK, 1, 0)
	update := yamuxHeader(yamuxTypeWindowUpdate, 0, 3, 1<<18)
	mustWrite(t, c, ack)
	mustWrite(t, c, update)
	w := rec.got()
	if len(w) != 1 || !bytes.Equal(w[0], append(bytes.Clone(ack), update...)) {
		t.Fatalf("a window update waited or lost its order: %q", w)
	}
	for _, h := range [][]byte{
		yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagFIN, 1, 0),
		yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagACK|yamuxFlagFIN, 7, 0),
		yamuxHeader(2 /* ping */, yamuxFlagSYN, 0, 7),
		yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagRST, 5, 0),
		yamuxHeader(3 /* go away */, 0, 0, 0),
	} {
		before := len(rec.got())
		mustWrite(t, c, h)
		if len(rec.got()) != before+1 {
			t.Fatalf("header %x was held", h)
		}
	}
}

func TestCoalesceFlushesHeldFramesAfterHold(t *testing.T) {
	rec := &recordingConn{}
	c := CoalesceWrites(rec, 20*time.Millisecond)
	defer c.Close()
	ack := yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagACK, 1, 1<<19)
	start := time.Now()
	mustWrite(t, c, ack)
	for len(rec.got()) == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("a held accept frame was never written")
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("flushed after %s, before the hold", d)
	}
	if w := rec.got(); !bytes.Equal(w[0], ack) {
		t.Fatalf("flushed %q", w[0])
	}
}

func TestCoalesceWritesLargeBodySeparately(t *testing.T) {
	rec := &recordingConn{}
	c := CoalesceWrites(rec, time.Hour)
	defer c.Close()
	body := bytes.Repeat([]byte("b"), maxJoined+1)
	mustWrite(t, c, yamuxHeader(yamuxTypeData, 0, 1, uint32(len(body))))
	mustWrite(t, c, body)
	w := rec.got()
	if len(w) != 2 || len(w[0]) != yamuxHeaderSize || len(w[1]) != len(body) {
		t.Fatalf("write sizes %d", len(w))
	}
}

func TestCoalesceTimerFailureFailsTheStream(t *testing.T) {
	rec := &recordingConn{fail: errors.New("pipe broke")}
	c := CoalesceWrites(rec, time.Millisecond)
	defer c.Close()
	mustWrite(t, c, yamuxHeader(yamuxTypeWindowUpdate, yamuxFlagSYN, 1, 0))
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		closed := rec.closed
		rec.mu.Unlock()
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a failed flush did not close the stream")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("a write after a failed flush succeeded")
	}
}

func mustWrite(t *testing.T, w io.Writer, p []byte) {
	t.Helper()
	if n, err := w.Write(p); n != len(p) || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
}

// TestCoalesceOverYamux runs request/response exchanges, as the agent client
// and daemon do, over real yamux sessions and counts the writes each side
// makes: two per exchange (the message with its stream's open or accept,
// then the close), where yamux alone makes four (open or accept, header,
// body, close).
func TestCoalesceOverYamux(t *testing.T) {
	a, b := net.Pipe()
	ra, rb := &recordingConn{ReadWriteCloser: a}, &recordingConn{ReadWriteCloser: b}
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.EnableKeepAlive = false
	client, err := yamux.Client(CoalesceWrites(ra, time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := yamux.Server(CoalesceWrites(rb, time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() {
		for {
			st, err := server.AcceptStream()
			if err != nil {
				return
			}
			var req Request
			if ReadFrame(st, &req) == nil {
				WriteMessage(st, &Response{ReadFile: &ReadFileResponse{Path: req.ReadFile.Path}}, [][]byte{[]byte("data of " + req.ReadFile.Path)})
			}
			st.Close()
		}
	}()
	const n = 20
	for i := range n {
		st, err := client.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		st.SetDeadline(time.Now().Add(10 * time.Second))
		path := string(rune('a' + i))
		if err := WriteFrame(st, &Request{Op: OpReadFile, ReadFile: &ReadFileRequest{Path: path}}); err != nil {
			t.Fatal(err)
		}
		var resp Response
		if err := ReadFrame(st, &resp); err != nil {
			t.Fatal(err)
		}
		blobs, err := ReadRaw(st, MaxRawTotal)
		if err != nil || resp.PutData(blobs) != nil || string(resp.ReadFile.Data) != "data of "+path {
			t.Fatalf("exchange %d: %v, %+v", i, err, resp.ReadFile)
		}
		st.Close()
	}
	t.Logf("writes: client %d, server %d, for %d exchanges", len(ra.got()), len(rb.got()), n)
	// The server's last close may not have been written yet.
	if got := len(ra.got()); got != 2*n {
		t.Errorf("the client made %d writes for %d requests, want %d", got, n, 2*n)
	}
	if got := len(rb.got()); got < 2*n-1 || got > 2*n {
		t.Errorf("the server made %d writes for %d answers, want %d", got, n, 2*n)
	}
}
