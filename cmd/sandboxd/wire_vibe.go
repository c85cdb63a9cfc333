package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/vibe"
)

// wireVibe registers the background-worker tools when the config names a
// command for at least one tier, and makes the API accept each worker's
// run-scoped token on its own child run's tool endpoints.
func wireVibe(w *wiring) error {
	cmds := map[string][]string{}
	if f := w.cfg.Workers.Fast; f != nil {
		cmds[vibe.TierFast] = f.Command
	}
	if g := w.cfg.Workers.Good; g != nil {
		cmds[vibe.TierGood] = g.Command
	}
	if len(cmds) == 0 {
		w.registry.Omit("no worker command is configured in this sandboxd's config (workers:), so no run can start background workers",
			"vibe_spawn", "vibe_send", "vibe_wait", "vibe_kill", "vibe_list")
		return nil
	}
	hostDir := filepath.Join(w.dataDir, "workers")
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		return fmt.Errorf("workers' host directory %s cannot be created: %w", hostDir, err)
	}
	tokens := api.NewRunTokens()
	// The API is built after wiring; workers in sandboxes reach it through
	// the relay once it exists.
	var handler atomic.Pointer[http.Handler]
	m := vibe.NewManager(vibe.Config{
		Commands:  cmds,
		MaxPerRun: w.cfg.Questions.MaxWorkersPerRun,
		URL:       api.BaseURL,
		HostDir:   hostDir,
		Handler: func() http.Handler {
			if h := handler.Load(); h != nil {
				return *h
			}
			return nil
		},
	}, w.runs, tokens)
	for _, t := range vibe.Tools(m) {
		w.registry.Register(t)
	}
	w.apiOpts = append(w.apiOpts, api.WithRunTokens(tokens), api.WithHandlerHook(func(h http.Handler) { handler.Store(&h) }))
	w.runEnd = append(w.runEnd, func(r tools.Run) { m.EndRun(r.ID) })
	w.stats.workers = m.Counts

	// Workers cannot outlive this process usefully (their tokens and state
	// are in memory), so on SIGINT/SIGTERM they are killed at once: a
	// vibe_wait in flight then returns "killed" instead of holding the
	// HTTP shutdown until its deadline.
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		<-sig.Done()
		m.Close()
	}()
	w.closers = append(w.closers, func() {
		stop()
		<-watched
	})
	return nil
}
