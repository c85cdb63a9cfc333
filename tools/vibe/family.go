package vibe

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is the background-worker tools as a tool family. They register
// when the config names a command for at least one tier. The run store
// (the Setup's) makes each worker's child run, tokens issues its run-scoped token (which the API
// accepts on the child run's tool endpoints) and url is sandboxd's address
// as a spawning call reached it.
//
// Workers cannot outlive this process usefully (their tokens and state
// are in memory), so Drain kills them at once: a vibe_wait in flight then
// returns "killed" instead of holding the HTTP shutdown until its deadline.
func Family(tokens Tokens, url func(ctx context.Context) string) family.Family {
	return &fam{tokens: tokens, url: url}
}

type fam struct {
	family.Base
	tokens Tokens
	url    func(ctx context.Context) string
	m      *Manager // nil when no worker command is configured
	// api is the HTTP API's handler, set by Start before the daemon
	// serves; workers in sandboxes reach the API through a relay to it.
	api http.Handler
}

func (*fam) Name() string { return "workers" }

func (f *fam) Register(s *family.Setup) error {
	cmds := map[string][]string{}
	if w := s.Config.Workers.Fast; w != nil {
		cmds[TierFast] = w.Command
	}
	if w := s.Config.Workers.Good; w != nil {
		cmds[TierGood] = w.Command
	}
	if len(cmds) == 0 {
		s.Omit("no worker command is configured in this sandboxd's config (workers:), so no run can start background workers",
			"vibe_spawn", "vibe_send", "vibe_wait", "vibe_kill", "vibe_list")
		return nil
	}
	hostDir := filepath.Join(s.DataDir, "workers")
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		return fmt.Errorf("the workers' host directory %s cannot be created: %w", hostDir, err)
	}
	f.m = NewManager(Config{
		Commands:  cmds,
		MaxPerRun: s.Config.Questions.MaxWorkersPerRun,
		URL:       f.url,
		HostDir:   hostDir,
		Handler:   func() http.Handler { return f.api },
	}, s.Runs, f.tokens)
	s.Register(Tools(f.m)...)
	return nil
}

func (f *fam) Collector() prometheus.Collector {
	if f.m == nil {
		return metrics.Workers(nil)
	}
	return metrics.Workers(f.m.Counts)
}

func (f *fam) Start(_ context.Context, api http.Handler) error {
	f.api = api
	return nil
}

func (f *fam) RunEnded(r tools.Run) {
	if f.m != nil {
		f.m.EndRun(r.ID)
	}
}

func (f *fam) Drain(context.Context) {
	if f.m != nil {
		f.m.Close()
	}
}

func (f *fam) Close() error {
	if f.m != nil {
		f.m.Close()
	}
	return nil
}
