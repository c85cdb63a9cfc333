package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/askuser"
)

// wireQuestions wires the question port: its HTTP endpoints, ask_user, and
// the approval gate in front of every write and exec call.
//
// Questions live in memory. On SIGINT/SIGTERM the port closes at once —
// before the HTTP server drains — so every blocked ask_user or approval
// call returns "expired" and every console stream ends, rather than
// holding the shutdown until its deadline. After a restart nothing is
// pending: the callers went with the old process.
func wireQuestions(w *wiring) error {
	qc := w.cfg.Questions
	if err := qc.Check(); err != nil {
		return err
	}
	port := questions.New(
		questions.WithExpiry(qc.DefaultExpiry.D(), qc.MaxExpiry.D()),
		questions.WithHeartbeat(qc.Heartbeat.D()),
		questions.WithMaxPending(qc.MaxPendingPerSpace),
	)
	gate := askuser.NewGate(port)
	w.registry.Register(askuser.New(port))
	w.registry.SetGate(gate)
	w.apiOpts = append(w.apiOpts, api.WithQuestions(port))
	w.stats.questions = port.PendingByKind
	w.runEnd = append(w.runEnd, func(r tools.Run) {
		port.CancelRun(r.ID)
		gate.Forget(r.ID)
	})

	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		<-sig.Done()
		port.Close()
	}()
	w.closers = append(w.closers, func() {
		stop()
		<-watched
	})
	return nil
}
