package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// stream responds to a POST with an SSE stream, for a client that accepts only
// that: a `: heartbeat` comment while the response is pending (so proxies
// keep the connection and a gone client is noticed), then one `message`
// event with the response, and the stream ends. The response is computed on a
// goroutine of its own with the request's context, so a client that goes
// away ends its calls as it would end a plain POST's; the handler waits for
// it in every case.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, answer func(ctx context.Context) any) {
	h.streamWith(w, r, nil, answer)
}

// streamWith is stream that also sends, before the response, the messages
// that arrive on notes while it is computed (a call's progress); those
// queued when the response is ready go first.
func (h *Handler) streamWith(w http.ResponseWriter, r *http.Request, notes <-chan []byte, answer func(ctx context.Context) any) {
	done := make(chan any, 1)
	go func() { done <- answer(r.Context()) }()

	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	failed := false
	send := func(b []byte) {
		if failed {
			return
		}
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil || rc.Flush() != nil {
			failed = true
		}
	}
	defer func() {
		if !failed {
			rc.SetWriteDeadline(time.Time{})
		}
	}()
	send([]byte(": stream open\n\n"))
	tick := time.NewTicker(h.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			send([]byte(": heartbeat\n\n"))
		case b := <-notes:
			send(sseMessage(b))
		case v := <-done:
			for drained := false; !drained; {
				select {
				case b := <-notes:
					send(sseMessage(b))
				default:
					drained = true
				}
			}
			if v == nil {
				return // only notifications: nothing to respond to
			}
			b, err := json.Marshal(v)
			if err != nil {
				b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"the answer could not be encoded; this is a bug in sandboxd"}}`)
			}
			send(sseMessage(b))
			return
		}
	}
}

// sseMessage is one SSE event carrying a JSON-RPC message.
func sseMessage(b []byte) []byte {
	return append(append([]byte("event: message\ndata: "), b...), '\n', '\n')
}
