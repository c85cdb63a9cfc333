package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Questions is what the API needs of the question port.
type Questions interface {
	Pending(tenant, space string) []questions.Question
	Subscribe(tenant, space string) (*questions.Subscription, []questions.Question)
	Answer(tenant, id string, a questions.Answer) error
	Heartbeat() time.Duration
}

// WithQuestions serves the question endpoints from q. Without it they
// respond 503: no question port is wired.
func WithQuestions(q Questions) Option { return func(s *Server) { s.questions = q } }

// streamWriteTimeout bounds one write to an SSE stream: a console that
// stopped reading is cut off instead of holding its stream (and the
// "connected" state of its space) forever.
const streamWriteTimeout = 10 * time.Second

func (s *Server) questionPort() (Questions, error) {
	if s.questions == nil {
		return nil, errdefs.Unavailable("this sandboxd has no question port wired; questions cannot be listed or answered here")
	}
	return s.questions, nil
}

func validSpace(space string) error {
	if err := sandbox.ValidateConversation(space); err != nil {
		return errdefs.InvalidArgument("space %q is invalid: use 1 to %d letters, digits, '.', '_', ':' or '-', starting with a letter or digit",
			space, sandbox.MaxConversationLen)
	}
	return nil
}

// listQuestions responds with the space's pending questions as JSON, or as an
// SSE stream when the client accepts text/event-stream.
func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request, tenant string) error {
	qp, err := s.questionPort()
	if err != nil {
		return err
	}
	space := r.PathValue("space")
	if err := validSpace(space); err != nil {
		return err
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return s.streamQuestions(w, r, qp, tenant, space)
	}
	writeJSON(w, http.StatusOK, qp.Pending(tenant, space))
	return nil
}

// streamQuestions is one human's stream: the pending questions first, then
// every `question` and `resolved` event, with a comment every heartbeat so
// a dead connection is found by a failing write. The space counts as
// connected exactly while this handler runs.
func (s *Server) streamQuestions(w http.ResponseWriter, r *http.Request, qp Questions, tenant, space string) error {
	rc := http.NewResponseController(w)
	sub, pending := qp.Subscribe(tenant, space)
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)

	send := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send([]byte("retry: 2000\n: connected\n\n")) {
		return nil
	}
	for i := range pending {
		if !send(sseEvent(questions.EventQuestion, pending[i])) {
			return nil
		}
	}
	tick := time.NewTicker(qp.Heartbeat())
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-sub.Done():
			return nil
		case <-tick.C:
			if !send([]byte(": heartbeat\n\n")) {
				return nil
			}
		case ev := <-sub.Events():
			var b []byte
			if ev.Type == questions.EventQuestion {
				b = sseEvent(ev.Type, ev.Question)
			} else {
				b = sseEvent(ev.Type, ev.Resolved)
			}
			if !send(b) {
				return nil
			}
		}
	}
}

// sseEvent formats one event; JSON has no raw newlines, so one data line.
func sseEvent(name string, v any) []byte {
	data, _ := json.Marshal(v)
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, data)
}

// AnswerResult is the response to POST /v1/questions/{id}/answer.
type AnswerResult struct {
	ID     string `json:"id"`
	Status string `json:"status"` // answered or skipped
}

func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request, tenant string) error {
	qp, err := s.questionPort()
	if err != nil {
		return err
	}
	var a questions.Answer
	if err := decodeJSON(w, r, s.maxBody, &a); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := qp.Answer(tenant, id, a); err != nil {
		return err
	}
	st := questions.StatusAnswered
	if a.Skip {
		st = questions.StatusSkipped
	}
	writeJSON(w, http.StatusOK, AnswerResult{ID: id, Status: st})
	return nil
}
