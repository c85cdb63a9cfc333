package main

import (
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/callrec"
)

// wireCalls keeps each run's recent tool calls for the console's live call
// view (GET /v1/runs/{id}/calls). The calls live in memory only: a bounded
// ring per run, forgotten when the run ends; after a restart the view
// starts empty.
func wireCalls(w *wiring) error {
	rec := callrec.New()
	w.registry.AddObserver(rec)
	w.apiOpts = append(w.apiOpts, api.WithCalls(rec))
	w.runEnd = append(w.runEnd, func(r tools.Run) { rec.Forget(r.ID) })
	return nil
}
