package askuser

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is the question port as a tool family: its HTTP endpoints (the
// port is served by the API), ask_user, and the approval gate in front of
// every write and exec call.
//
// Questions live in memory. Drain closes the port before the HTTP server
// waits for its requests, so every blocked ask_user or approval call
// returns "expired" and every console stream ends instead of holding the
// shutdown until its deadline. After a restart nothing is pending: the
// callers went with the old process.
func Family() family.Family { return &fam{} }

type fam struct {
	family.Base
	port *questions.Port
	gate *Gate
}

func (*fam) Name() string { return "questions" }

func (*fam) Validate(cfg *config.Config) error { return cfg.Questions.Check() }

func (f *fam) Register(s *family.Setup) error {
	qc := s.Config.Questions
	f.port = questions.New(
		questions.WithExpiry(qc.DefaultExpiry.D(), qc.MaxExpiry.D()),
		questions.WithHeartbeat(qc.Heartbeat.D()),
		questions.WithMaxPending(qc.MaxPendingPerSpace),
		questions.WithObserver(questionEvents(s.Events)),
	)
	f.gate = NewGate(f.port)
	s.Register(New(f.port))
	s.Tools.SetGate(f.gate)
	s.Serve(f.port)
	return nil
}

func (f *fam) Collector() prometheus.Collector {
	if f.port == nil {
		return metrics.QuestionsPending(nil)
	}
	return metrics.QuestionsPending(f.port.PendingByKind)
}

func (f *fam) RunEnded(r tools.Run) {
	f.port.CancelRun(r.ID)
	f.gate.Forget(r.ID)
}

func (f *fam) Drain(context.Context) { f.port.Close() }

func (f *fam) Close() error {
	f.port.Close()
	return nil
}

// questionEvents turns questions asked and resolved into events; the
// resolution's status (answered, skipped, expired, withdrawn, canceled) is
// the answered event's reason.
func questionEvents(bus *events.Bus) func(string, questions.Question, *questions.Resolution) {
	return func(tenant string, q questions.Question, r *questions.Resolution) {
		ev := events.Event{Type: events.QuestionAsked, Tenant: tenant, Run: q.Run, Question: q.ID}
		if r != nil {
			ev.Type, ev.Reason = events.QuestionAnswered, r.Status
		}
		bus.Emit(ev)
	}
}
