//go:build cgo

package main

import (
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

// wireAstgrep registers ast_grep, ast_edit and resolve over one tree-sitter
// engine shared by all sandboxes (its caches are keyed by sandbox), and
// drops a run's prepared edits when the run ends. A prepared edit is also
// kept in its sandbox, so that another replica can resolve it.
func wireAstgrep(w *wiring) error {
	ts, dropRun := astgrep.Tools(engine.New(), astgrep.WithLogger(w.log.With("tool", "ast_edit")))
	for _, t := range ts {
		w.registry.Register(t)
	}
	w.runEnd = append(w.runEnd, func(r tools.Run) { dropRun(r.ID) })
	return nil
}
