// Package envd serves, from sandboxd, the API that E2B's SDKs call inside a
// sandbox ("envd"): the Connect RPC services process.Process and
// filesystem.Filesystem with JSON messages, and the REST routes /files and
// /health. Every call goes through the sandbox's agent pipe, taken from the
// sandbox manager, so a call on a paused sandbox resumes it first.
package envd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// This file is the Connect protocol as far as the SDK uses it: unary calls
// are a POST of one JSON message answered by one (or by an error object and
// its HTTP status); streams are a POST of enveloped messages answered by
// enveloped messages and one end-of-stream envelope carrying the error, if
// any. An envelope is a flag byte and a 4-byte big-endian length, then the
// message.

// Envelope flags.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
)

// maxMessage caps one request message: input sent to a process is the
// largest the SDK sends.
const maxMessage = 16 << 20

// Connect's error codes (the wire names).
const (
	codeCanceled           = "canceled"
	codeUnknown            = "unknown"
	codeInvalidArgument    = "invalid_argument"
	codeDeadlineExceeded   = "deadline_exceeded"
	codeNotFound           = "not_found"
	codeAlreadyExists      = "already_exists"
	codeResourceExhausted  = "resource_exhausted"
	codeFailedPrecondition = "failed_precondition"
	codeUnimplemented      = "unimplemented"
	codeInternal           = "internal"
	codeUnavailable        = "unavailable"
	codeUnauthenticated    = "unauthenticated"
)

// rpcError is an error with a Connect code.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// rpcErr makes an error of code with a message.
func rpcErr(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// toRPC classes err by sandboxd's error classes.
func toRPC(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	code := codeUnknown
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		code = codeInvalidArgument
	case errors.Is(err, errdefs.ErrNotFound):
		code = codeNotFound
	case errors.Is(err, errdefs.ErrConflict):
		code = codeAlreadyExists
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		code = codeFailedPrecondition
	case errors.Is(err, errdefs.ErrResourceExhausted):
		code = codeResourceExhausted
	case errors.Is(err, errdefs.ErrUnauthenticated):
		code = codeUnauthenticated
	case errors.Is(err, errdefs.ErrUnavailable):
		code = codeUnavailable
	case errors.Is(err, errdefs.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		code = codeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codeCanceled
	case errors.Is(err, errdefs.ErrInternal):
		code = codeInternal
	}
	return &rpcError{Code: code, Message: err.Error()}
}

// httpStatus is the status a unary error is answered with (Connect's table).
func httpStatus(code string) int {
	switch code {
	case codeCanceled:
		return 499
	case codeInvalidArgument, codeFailedPrecondition:
		return http.StatusBadRequest
	case codeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case codeNotFound:
		return http.StatusNotFound
	case codeAlreadyExists:
		return http.StatusConflict
	case codeResourceExhausted:
		return http.StatusTooManyRequests
	case codeUnimplemented:
		return http.StatusNotImplemented
	case codeUnavailable:
		return http.StatusServiceUnavailable
	case codeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// writeUnaryError answers a unary call with err.
func writeUnaryError(w http.ResponseWriter, err error) {
	re := toRPC(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus(re.Code))
	json.NewEncoder(w).Encode(re)
}

// writeUnary answers a unary call with msg.
func writeUnary(w http.ResponseWriter, msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		writeUnaryError(w, errdefs.Internal("the answer cannot be encoded: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// readUnary reads a unary call's JSON message into msg.
func readUnary(r *http.Request, msg any) error {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		return rpcErr(codeInvalidArgument, "content type %q is not served here; send Connect unary calls as application/json", r.Header.Get("Content-Type"))
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		return rpcErr(codeInvalidArgument, "the request body cannot be read: %v", err)
	}
	if len(b) > maxMessage {
		return rpcErr(codeResourceExhausted, "the request message is over %d MiB; send less at once", maxMessage>>20)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, msg); err != nil {
		return rpcErr(codeInvalidArgument, "the request message is not valid JSON for this call: %v", err)
	}
	return nil
}

// readEnvelope reads one enveloped message from r into msg. It returns
// io.EOF when the stream ends cleanly before a message, and end=true for
// an end-of-stream envelope.
func readEnvelope(r io.Reader, msg any) (end bool, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return false, io.EOF
		}
		return false, rpcErr(codeInvalidArgument, "the request stream is cut inside an envelope header: %v", err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxMessage {
		return false, rpcErr(codeResourceExhausted, "a request message of %d bytes is over the %d MiB cap; send less at once", n, maxMessage>>20)
	}
	if hdr[0]&flagCompressed != 0 {
		return false, rpcErr(codeUnimplemented, "compressed messages are not served here; send them uncompressed")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return false, rpcErr(codeInvalidArgument, "the request stream is cut inside a message: %v", err)
	}
	if hdr[0]&flagEndStream != 0 {
		return true, nil
	}
	if len(b) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(b, msg); err != nil {
		return false, rpcErr(codeInvalidArgument, "a request message is not valid JSON for this call: %v", err)
	}
	return false, nil
}

// readRequest reads a server stream's one request message into msg, then
// the body to its end: a body read whole lets net/http notice a client
// that goes away and lift the read deadline it set for the request.
func readRequest(r *http.Request, msg any) error {
	_, err := readEnvelope(r.Body, msg)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, maxMessage))
	return nil
}

// envelope returns msg's bytes in an envelope with flags.
func envelope(flags byte, b []byte) []byte {
	out := make([]byte, 5+len(b))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	copy(out[5:], b)
	return out
}

// endMessage is the end-of-stream envelope's body.
type endMessage struct {
	Error    *rpcError           `json:"error,omitempty"`
	Metadata map[string][]string `json:"metadata,omitempty"`
}

// stream answers a streaming call. Send and End may be called from more
// than one goroutine (the keepalive ticker and the events).
type stream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	rc    *http.ResponseController
	ended bool
	err   error // the first write error: the client is gone
}

// startStream checks r is a streaming call and sends the response head.
func startStream(w http.ResponseWriter, r *http.Request) (*stream, error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/connect+json" {
		return nil, rpcErr(codeInvalidArgument, "content type %q is not served here; send Connect streaming calls as application/connect+json", r.Header.Get("Content-Type"))
	}
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w)}
	s.rc.Flush()
	return s, nil
}

// Send writes one message and flushes it.
func (s *stream) Send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return s.write(envelope(0, b))
}

func (s *stream) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errors.New("the stream has ended")
	}
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

// End writes the end-of-stream envelope with err (nil: success).
func (s *stream) End(err error) {
	var m endMessage
	if err != nil {
		m.Error = toRPC(err)
	}
	b, _ := json.Marshal(m)
	s.write(envelope(flagEndStream, b))
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// streamFail answers a streaming call that fails before its first
// message: a 200 whose only envelope is the end carrying err. A client of
// the Connect protocol reads a stream's error only from there; a status
// other than 200 it would take for the HTTP status's code (404 is
// "unimplemented" to it, not "not found").
func streamFail(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	b, _ := json.Marshal(endMessage{Error: toRPC(err)})
	w.Write(envelope(flagEndStream, b))
}

// streaming reports whether method of service answers with a stream.
func streaming(service, method string) bool {
	switch service + "/" + method {
	case "process.Process/Start", "process.Process/Connect", "process.Process/StreamInput", "filesystem.Filesystem/WatchDir":
		return true
	}
	return false
}

// keepalive calls send every interval the client asked for (header
// Keepalive-Ping-Interval, seconds; none: every 50 s), until ctx ends.
func keepalive(ctx context.Context, r *http.Request, send func() error) {
	every := 50 * time.Second
	if v, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval")); err == nil && v > 0 {
		every = time.Duration(min(v, 3600)) * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if send() != nil {
				return
			}
		}
	}
}

// callTimeout is the deadline the client gave a call (header
// Connect-Timeout-Ms); 0 when none.
func callTimeout(r *http.Request) (time.Duration, error) {
	v := r.Header.Get("Connect-Timeout-Ms")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || len(v) > 10 {
		return 0, rpcErr(codeInvalidArgument, "Connect-Timeout-Ms %q is not a number of milliseconds (at most 10 digits)", v)
	}
	return time.Duration(n) * time.Millisecond, nil
}
