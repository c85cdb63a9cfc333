package api

import "net/http"

// ReadyStatus is /readyz's response while sandboxd serves: "ok", or
// "degraded" with one message per problem that leaves it serving (a warm
// pool that cannot refill: creates of its image are made cold meanwhile).
type ReadyStatus struct {
	Status   string   `json:"status"`
	Problems []string `json:"problems,omitempty"`
}

// WithReadyNotes makes /readyz name the degradations notes returns. They
// keep the status 200: only an engine that does not respond makes sandboxd
// not ready, since that alone stops it from serving.
func WithReadyNotes(notes func() []string) Option { return func(s *Server) { s.readyNotes = notes } }

func (s *Server) writeReady(w http.ResponseWriter) {
	var problems []string
	if s.readyNotes != nil {
		problems = s.readyNotes()
	}
	if len(problems) > 0 {
		writeJSON(w, http.StatusOK, ReadyStatus{Status: "degraded", Problems: problems})
		return
	}
	writeJSON(w, http.StatusOK, ReadyStatus{Status: "ok"})
}
