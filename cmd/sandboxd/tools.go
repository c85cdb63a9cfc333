package main

import (
	"log/slog"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
)

// wiring is what a tool family needs from serve to plug itself in. Each
// family has one wire function in its own file (wire_<family>.go) that
// registers its tools and adds the hooks it needs; registerTools calls them.
type wiring struct {
	log       *slog.Logger
	cfg       *config.Config
	dataDir   string
	agentBin  string
	registry  *tools.Registry
	sandboxes *sandbox.Manager
	runs      *runstore.Store

	// Filled by wire functions and consumed by serve.
	envHooks []api.EnvHook       // complete every tools.Env the API builds
	apiOpts  []api.Option        // extra API options (routes, gates)
	runEnd   []func(r tools.Run) // called when a run ends, for per-run state
	closers  []func()            // called at shutdown, in reverse order
	stats    familyStats         // the families' counts, read by the metrics
}

// registerTools registers every tool family this build ships.
func registerTools(w *wiring) error {
	for _, t := range files.Tools() {
		w.registry.Register(t)
	}
	if err := wireCalls(w); err != nil {
		return err
	}
	if err := wireDebug(w); err != nil {
		return err
	}
	if err := wireLSP(w); err != nil {
		return err
	}
	if err := wireQuestions(w); err != nil {
		return err
	}
	if err := wireEval(w); err != nil {
		return err
	}
	if err := wireVibe(w); err != nil {
		return err
	}
	if err := wireAstgrep(w); err != nil {
		return err
	}
	return nil
}
