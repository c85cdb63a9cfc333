package api

import (
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools/callrec"
)

// Calls is what the API needs of the call recorder: the recent tool calls
// of a run, and a subscription to those that finish from now on.
type Calls interface {
	Calls(tenant, run string) []callrec.Call
	Subscribe(tenant, run string) (*callrec.Subscription, []callrec.Call)
}

var _ Calls = (*callrec.Recorder)(nil)

// WithCalls serves GET /v1/runs/{id}/calls from c. Without it the route
// responds 503: no recorder is wired.
func WithCalls(c Calls) Option { return func(s *Server) { s.calls = c } }

// callsHeartbeat is the comment interval of a silent call stream: a dead
// connection is found by a failing write.
const callsHeartbeat = 15 * time.Second

// listCalls responds with the run's recent tool calls (oldest first) as JSON,
// or with Accept: text/event-stream as an SSE stream: those calls, then each
// call as it finishes, one `call` event each. A stream whose reader falls too
// far behind ends; the reader reconnects and skips what it has by seq.
func (s *Server) listCalls(w http.ResponseWriter, r *http.Request, tenant string) error {
	if s.calls == nil {
		return errdefs.Unavailable("this sandboxd records no tool calls (no call recorder is wired); the call log cannot be shown")
	}
	run, err := s.runs.Get(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	if !wantsStream(r) {
		writeJSON(w, http.StatusOK, s.calls.Calls(tenant, run.ID))
		return nil
	}
	sub, backlog := s.calls.Subscribe(tenant, run.ID)
	defer sub.Close()

	// The same SSE writer as a streamed tool call's: headers with the first
	// event, a write deadline per event, cleared when the stream ends.
	sw := newSSEWriter(w)
	defer sw.release()
	send := func(b []byte) bool {
		sw.send(b)
		return !sw.failed
	}
	if !send([]byte("retry: 2000\n: connected\n\n")) {
		return nil
	}
	for _, c := range backlog {
		if !send(sseEvent("call", c)) {
			return nil
		}
	}
	tick := time.NewTicker(callsHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case c := <-sub.Events():
			if !send(sseEvent("call", c)) {
				return nil
			}
		case <-sub.Done():
			// Dropped (too slow) or the run ended: what was queued still
			// goes out, then the stream ends.
			for {
				select {
				case c := <-sub.Events():
					if !send(sseEvent("call", c)) {
						return nil
					}
				default:
					return nil
				}
			}
		case <-tick.C:
			if !send([]byte(": heartbeat\n\n")) {
				return nil
			}
		}
	}
}
