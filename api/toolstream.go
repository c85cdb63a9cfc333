package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Defaults of streamed tool calls (WithToolStream).
const (
	// DefaultStreamHeartbeat is how often a silent stream gets a comment,
	// so proxies keep it and a dead client is found by a failing write.
	DefaultStreamHeartbeat = 15 * time.Second
	// DefaultStreamMaxBytes caps the text one streamed call shows live.
	DefaultStreamMaxBytes = 1 << 20
	// streamBufferBytes caps the text waiting for a slow client.
	streamBufferBytes = 256 << 10
)

// SSE event names of a streamed tool call.
const (
	EventOutput = "output"
	EventResult = "result"
	EventError  = "error"
)

// StreamError is the data of the `error` event: the error body a plain call
// returns, with the HTTP status it would have had.
type StreamError struct {
	Status int         `json:"status"`
	Error  ErrorDetail `json:"error"`
}

// WithToolStream sets the heartbeat interval and the cap on live text of
// tool calls made with Accept: text/event-stream. A value <= 0 keeps that
// default.
func WithToolStream(heartbeat time.Duration, maxBytes int64) Option {
	return func(s *Server) {
		if heartbeat > 0 {
			s.streamHeartbeat = heartbeat
		}
		if maxBytes > 0 {
			s.streamMax = maxBytes
		}
	}
}

// wantsStream reports whether the client asked for an SSE response.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// callOutcome is what the call's goroutine hands the handler.
type callOutcome struct {
	res tools.Result
	err error
}

// streamCall runs a tool call whose response is an SSE stream: `output`
// events while it runs, a `: heartbeat` comment while it is silent, and one
// `result` event with the exact JSON a plain call responds with (or one
// `error` event, see StreamError). Nothing is written until the first event,
// so a call that fails before it streamed anything (a tool the run does not
// see) still responds with a real HTTP status.
//
// The call runs on a goroutine of its own with the request's context, as a
// plain call does: a client that disconnects ends the call as it would end
// a plain one (a write already sent to the sandbox completes there). A
// client that stalls only loses its stream (writes have a deadline); the
// call runs on, and the handler returns when it ends.
func (s *Server) streamCall(w http.ResponseWriter, r *http.Request, env *tools.Env, name string, args json.RawMessage) error {
	q := newOutputQueue(s.streamMax, streamBufferBytes)
	ctx := tools.WithOutputSink(r.Context(), q)
	done := make(chan callOutcome, 1)
	go func() {
		var out callOutcome
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(ctx, "tool call panicked", "request_id", requestID(ctx), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				out = callOutcome{err: errdefs.Internal("sandboxd failed while running tool %q (request id %s); the error is logged, retry or report it", name, requestID(ctx))}
			}
			done <- out
		}()
		out.res, out.err = s.tools.Call(ctx, env, name, args)
	}()

	sw := newSSEWriter(w)
	defer sw.release()
	tick := time.NewTicker(s.streamHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-q.notify:
			for _, ev := range q.take() {
				sw.send(sseEvent(EventOutput, ev))
			}
			tick.Reset(s.streamHeartbeat)
		case <-tick.C:
			sw.send([]byte(": heartbeat\n\n"))
		case out := <-done:
			for _, ev := range q.take() {
				sw.send(sseEvent(EventOutput, ev))
			}
			return s.finishStream(sw, r, out)
		}
	}
}

// finishStream writes the call's outcome as the stream's last event. An
// error before anything was streamed keeps its real HTTP status and plain
// body; a result is always the `result` event a client asking for a
// stream waits for, even from a call that printed nothing.
func (s *Server) finishStream(sw *sseWriter, r *http.Request, out callOutcome) error {
	if !sw.committed && out.err != nil {
		return out.err
	}
	if out.err != nil {
		status := StatusOf(out.err)
		if status == http.StatusInternalServerError {
			s.log.ErrorContext(r.Context(), "internal error", "request_id", requestID(r.Context()), "err", out.err)
		}
		sw.send(sseEvent(EventError, StreamError{Status: status, Error: ErrorDetail{Code: errdefs.Code(out.err), Message: out.err.Error()}}))
		return nil
	}
	sw.send(sseEvent(EventResult, normalized(out.res)))
	return nil
}

// normalized is res as a plain call returns it.
func normalized(res tools.Result) tools.Result {
	if res.Content == nil {
		res.Content = []tools.Block{}
	}
	return res
}

// sseWriter writes one SSE response: the headers with the first event, each
// event flushed, each write bounded by streamWriteTimeout. After a write
// fails it writes nothing more.
type sseWriter struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	committed bool // the headers are out
	failed    bool // a write failed: the client is gone or stalled
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

func (sw *sseWriter) send(b []byte) {
	if sw.failed {
		return
	}
	if !sw.committed {
		h := sw.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
		h.Set("X-Content-Type-Options", "nosniff")
		sw.w.WriteHeader(http.StatusOK)
		sw.committed = true
	}
	sw.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := sw.w.Write(b); err != nil {
		sw.failed = true
		return
	}
	if sw.rc.Flush() != nil {
		sw.failed = true
	}
}

// release clears the write deadline, which would otherwise outlive the
// stream on a kept-alive connection (the server sets none of its own).
func (sw *sseWriter) release() {
	if sw.committed && !sw.failed {
		sw.rc.SetWriteDeadline(time.Time{})
	}
}
