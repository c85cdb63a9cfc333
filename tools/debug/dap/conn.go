// Package dap is a Debug Adapter Protocol client connection: framing, a
// pending-request table and event/reverse-request dispatch. It decodes the
// base message itself and keeps bodies raw, so an adapter's custom events
// and commands (which github.com/google/go-dap's decoder rejects) never fail
// the connection; callers decode bodies into go-dap's types.
package dap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools/internal/baseproto"
)

// MaxMessageBytes caps one incoming message; a bigger one ends the
// connection (an adapter never needs that much for one response).
const MaxMessageBytes = 32 << 20

// Message is any DAP message with its body or arguments left raw.
type Message struct {
	Seq        int             `json:"seq"`
	Type       string          `json:"type"`
	Command    string          `json:"command,omitempty"`
	Event      string          `json:"event,omitempty"`
	RequestSeq int             `json:"request_seq,omitempty"`
	Success    bool            `json:"success,omitempty"`
	Message    string          `json:"message,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
}

// Handler receives what the adapter sends on its own. Both methods run on
// the connection's reader goroutine and must not block.
type Handler interface {
	// Event is called for every event, known or not.
	Event(m *Message)
	// ReverseRequest responds to a request from the adapter (runInTerminal,
	// startDebugging, ...): a body for success or an error for a refusal.
	ReverseRequest(m *Message) (body any, err error)
}

// ResponseError is a response with success=false.
type ResponseError struct {
	Command string
	Text    string
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("the adapter refused %s: %s", e.Command, e.Text)
}

// ErrClosed is returned for requests on a connection that has ended.
var ErrClosed = errors.New("the debug adapter connection is closed")

// Conn is one connection to a debug adapter.
//
// Goroutines: one reader (until the stream ends or Close); reverse-request
// responses are written from short-lived goroutines through the same
// serialized writer. Close closes the stream, which ends the reader, which
// fails every pending request.
type Conn struct {
	rwc io.ReadWriteCloser
	h   Handler

	// wmu serializes writes to rwc and guards seq.
	wmu sync.Mutex
	seq int

	// mu guards pending and err.
	mu      sync.Mutex
	pending map[int]chan *Message
	err     error

	done chan struct{} // closed when the reader has exited
}

// NewConn starts reading from rwc. h may be nil (events are dropped and
// reverse requests refused).
func NewConn(rwc io.ReadWriteCloser, h Handler) *Conn {
	c := &Conn{rwc: rwc, h: h, pending: map[int]chan *Message{}, done: make(chan struct{})}
	go c.read()
	return c
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (nil while it runs).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection. A stream whose Close only half-closes (a
// multiplexed stream) is also given a past read deadline, so the reader
// returns; Close waits for it a bounded time.
func (c *Conn) Close() error {
	if d, ok := c.rwc.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Now())
	}
	err := c.rwc.Close()
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
	}
	return err
}

// Pending is a request sent that has no response yet.
type Pending struct {
	c       *Conn
	seq     int
	command string
	ch      chan *Message
}

// Start sends a request without waiting for its response (debugpy responds to
// launch only after configurationDone).
func (c *Conn) Start(ctx context.Context, command string, args any) (*Pending, error) {
	var raw json.RawMessage
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("dap: encoding %s arguments: %w", command, err)
		}
		raw = b
	}
	ch := make(chan *Message, 1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.seq++
	seq := c.seq
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[seq] = ch
	c.mu.Unlock()
	if err := c.writeLocked(&Message{Seq: seq, Type: "request", Command: command, Arguments: raw}); err != nil {
		c.forget(seq)
		return nil, err
	}
	return &Pending{c: c, seq: seq, command: command, ch: ch}, nil
}

// Wait waits for the response until ctx ends.
func (p *Pending) Wait(ctx context.Context) (*Message, error) {
	select {
	case m, ok := <-p.ch:
		if !ok {
			return nil, p.c.closedErr()
		}
		if !m.Success {
			return m, &ResponseError{Command: p.command, Text: errorText(m)}
		}
		return m, nil
	case <-ctx.Done():
		p.c.forget(p.seq)
		return nil, fmt.Errorf("no answer to %s from the debug adapter: %w", p.command, ctx.Err())
	}
}

// Do sends a request and waits for its response; on success it decodes the
// body into out (when out is not nil).
func (c *Conn) Do(ctx context.Context, command string, args, out any) error {
	p, err := c.Start(ctx, command, args)
	if err != nil {
		return err
	}
	m, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if out != nil && len(m.Body) > 0 {
		if err := json.Unmarshal(m.Body, out); err != nil {
			return fmt.Errorf("the debug adapter's answer to %s cannot be read: %w", command, err)
		}
	}
	return nil
}

func (c *Conn) closedErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

func (c *Conn) forget(seq int) {
	c.mu.Lock()
	delete(c.pending, seq)
	c.mu.Unlock()
}

// writeLocked frames and writes m; the caller holds wmu.
func (c *Conn) writeLocked(m *Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := c.rwc.Write(baseproto.Append(make([]byte, 0, len(body)+32), body)); err != nil {
		return fmt.Errorf("writing to the debug adapter: %w", err)
	}
	return nil
}

func (c *Conn) read() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.rwc, 64<<10)
	var err error
	for {
		var m *Message
		m, err = readMessage(br)
		if err != nil {
			break
		}
		c.dispatch(m)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		err = ErrClosed
	}
	c.mu.Lock()
	c.err = err
	for seq, ch := range c.pending {
		close(ch)
		delete(c.pending, seq)
	}
	c.mu.Unlock()
}

func (c *Conn) dispatch(m *Message) {
	switch m.Type {
	case "response":
		c.mu.Lock()
		ch := c.pending[m.RequestSeq]
		delete(c.pending, m.RequestSeq)
		c.mu.Unlock()
		if ch != nil {
			ch <- m // buffered, one response per request
		}
	case "event":
		if c.h != nil {
			c.h.Event(m)
		}
	case "request":
		var body any
		err := errors.New("sandboxd does not support this request")
		if c.h != nil {
			body, err = c.h.ReverseRequest(m)
		}
		resp := &Message{Type: "response", RequestSeq: m.Seq, Command: m.Command, Success: err == nil}
		if err != nil {
			resp.Message = err.Error()
		} else if body != nil {
			if b, merr := json.Marshal(body); merr == nil {
				resp.Body = b
			}
		}
		// Written off the reader goroutine so a slow adapter reading its
		// input cannot stall our reading of its output.
		go func() {
			c.wmu.Lock()
			defer c.wmu.Unlock()
			c.seq++
			resp.Seq = c.seq
			_ = c.writeLocked(resp)
		}()
	}
}

// readMessage reads one framed message.
func readMessage(br *bufio.Reader) (*Message, error) {
	buf, err := baseproto.Read(br, MaxMessageBytes)
	if err != nil {
		return nil, fmt.Errorf("dap: %w", err)
	}
	m := &Message{}
	if err := json.Unmarshal(buf, m); err != nil {
		return nil, fmt.Errorf("dap: a message is not JSON: %w", err)
	}
	return m, nil
}

// errorText is the human part of a failed response: the ErrorResponse's
// error.format when present, else message.
func errorText(m *Message) string {
	var body struct {
		Error *struct {
			Format    string            `json:"format"`
			Variables map[string]string `json:"variables"`
		} `json:"error"`
	}
	if len(m.Body) > 0 && json.Unmarshal(m.Body, &body) == nil && body.Error != nil && body.Error.Format != "" {
		s := body.Error.Format
		for k, v := range body.Error.Variables {
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		return s
	}
	if m.Message != "" {
		return m.Message
	}
	return "no reason given"
}
