// Package jsonrpc is JSON-RPC 2.0 over the Content-Length framing of the
// Language Server Protocol: one reader goroutine, one serialized writer, a
// table of pending requests, and handlers for what the peer sends us.
package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools/internal/baseproto"
)

// MaxMessageBytes caps one incoming message; a larger header is a protocol
// error that ends the connection (a server would never send one sanely).
const MaxMessageBytes = 64 << 20

// ErrClosed is returned by calls on a connection whose stream ended.
var ErrClosed = errors.New("the language server connection is closed")

// Error is a JSON-RPC error object in the peer's response.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Standard and LSP error codes used here.
const (
	CodeMethodNotFound   = -32601
	CodeInternalError    = -32603
	CodeRequestCancelled = -32800
)

// Handler serves the peer's requests and notifications. Notify must not
// block: it runs on the reader goroutine so that notifications are seen in
// the order they were sent.
// Request runs on its own goroutine and returns a result or an *Error.
type Handler interface {
	Notify(method string, params json.RawMessage)
	Request(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// Conn is one JSON-RPC connection.
//
// Goroutines: one reader (started by New) that ends when the stream ends or
// Close is called; one short-lived goroutine per request from the peer.
// Close closes the stream, which ends the reader, which fails every pending
// call with ErrClosed.
type Conn struct {
	rwc io.ReadWriteCloser
	h   Handler

	wmu sync.Mutex // guards writes to rwc, so frames never interleave

	mu      sync.Mutex // guards nextID, pending and err
	nextID  int64
	pending map[int64]chan *message
	err     error

	done chan struct{} // closed when the reader ends

	writeTimeout time.Duration
}

// DefaultWriteTimeout bounds one frame's write when the stream supports
// write deadlines.
const DefaultWriteTimeout = 10 * time.Second

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// New starts the reader on rwc; the Conn owns rwc.
func New(rwc io.ReadWriteCloser, h Handler) *Conn {
	c := &Conn{rwc: rwc, h: h, pending: map[int64]chan *message{}, done: make(chan struct{}), writeTimeout: DefaultWriteTimeout}
	go c.read()
	return c
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (nil while it is open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection and waits for the reader to stop.
func (c *Conn) Close() error {
	err := c.rwc.Close()
	<-c.done
	return err
}

// Call sends a request and decodes its result into result (which may be
// nil). When ctx ends first the request is cancelled with $/cancelRequest.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	raw, err := c.CallRaw(ctx, method, params)
	if err != nil {
		return err
	}
	if result == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("%s: the server's answer cannot be decoded: %w", method, err)
	}
	return nil
}

// CallRaw is Call returning the undecoded result ("null" stays "null").
func (c *Conn) CallRaw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan *message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	p, err := marshalParams(params)
	if err != nil {
		forget()
		return nil, err
	}
	if err := c.write(&message{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p}); err != nil {
		forget()
		return nil, err
	}
	select {
	case m := <-ch:
		if m == nil {
			return nil, c.Err()
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		forget()
		// Best effort, and off the caller's path: a server that honours it
		// stops working on the request.
		go func() { _ = c.Notify("$/cancelRequest", map[string]int64{"id": id}) }()
		return nil, ctx.Err()
	}
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	return c.write(&message{Method: method, Params: p})
}

func marshalParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	if raw, ok := params.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("cannot encode request parameters: %w", err)
	}
	return b, nil
}

func (c *Conn) write(m *message) error {
	m.JSONRPC = "2.0"
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("cannot encode a JSON-RPC message: %w", err)
	}
	frame := baseproto.Append(make([]byte, 0, len(body)+32), body)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.Err()
	default:
	}
	// A peer that stops reading must not hold the writer forever: past the
	// deadline the frame is half sent, so the connection is closed.
	dl, hasDeadline := c.rwc.(interface{ SetWriteDeadline(time.Time) error })
	if hasDeadline {
		_ = dl.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	}
	if _, err := c.rwc.Write(frame); err != nil {
		c.rwc.Close()
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	if hasDeadline {
		_ = dl.SetWriteDeadline(time.Time{})
	}
	return nil
}

func (c *Conn) read() {
	br := bufio.NewReaderSize(c.rwc, 64<<10)
	var err error
	for {
		var m *message
		m, err = readMessage(br)
		if err != nil {
			break
		}
		c.dispatch(m)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %v", ErrClosed, err)
	}
	c.mu.Lock()
	c.err = err
	pending := c.pending
	c.pending = map[int64]chan *message{}
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- nil
	}
	c.rwc.Close()
	close(c.done)
}

func (c *Conn) dispatch(m *message) {
	switch {
	case m.Method != "" && len(m.ID) > 0:
		go c.answer(m)
	case m.Method != "":
		if c.h != nil {
			c.h.Notify(m.Method, m.Params)
		}
	case len(m.ID) > 0:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return // not one of ours: we only send integer ids
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// answer runs the handler for one request from the peer and replies.
func (c *Conn) answer(m *message) {
	var (
		result any
		err    error
	)
	if c.h == nil {
		err = &Error{Code: CodeMethodNotFound, Message: "method not supported: " + m.Method}
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		result, err = c.h.Request(ctx, m.Method, m.Params)
		cancel()
	}
	reply := &message{ID: m.ID}
	if err != nil {
		var rpcErr *Error
		if !errors.As(err, &rpcErr) {
			rpcErr = &Error{Code: CodeInternalError, Message: err.Error()}
		}
		reply.Error = rpcErr
	} else {
		b, merr := json.Marshal(result)
		if merr != nil {
			reply.Error = &Error{Code: CodeInternalError, Message: merr.Error()}
		} else {
			reply.Result = b
		}
	}
	_ = c.write(reply)
}

// readMessage reads one framed message.
func readMessage(br *bufio.Reader) (*message, error) {
	body, err := baseproto.Read(br, MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	m := &message{}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("message is not JSON: %v", err)
	}
	return m, nil
}
