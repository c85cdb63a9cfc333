package main

import (
	"context"
	"fmt"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// wireLSP registers lsp and lsp_rename and plugs diagnostics on write into
// every run's write tools. Nothing starts here: servers start on the first
// call that needs one.
func wireLSP(w *wiring) error {
	c := w.cfg.LSP
	if err := c.Check(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if !c.On() {
		w.registry.Omit("language-server supervision is off in this sandboxd's config (lsp.enabled: false); only an operator can turn it on", "lsp", "lsp_rename")
		return nil
	}
	opts := []lsp.Option{}
	for _, s := range c.Servers {
		id := s.LanguageID
		if id == "" {
			id = s.Language
		}
		opts = append(opts, lsp.WithLanguages(&lsp.Language{
			Name: s.Language, Commands: [][]string{s.Command}, Extensions: s.Extensions, RootMarkers: s.RootMarkers,
			DefaultID: id, Quiet: 300,
		}))
	}
	if d := c.StartTimeout.D(); d > 0 {
		opts = append(opts, lsp.WithStartTimeout(d))
	}
	if d := c.RequestTimeout.D(); d > 0 {
		opts = append(opts, lsp.WithRequestTimeout(d))
	}
	if d := c.DiagnosticsWait.D(); d > 0 {
		opts = append(opts, lsp.WithDiagnosticsWait(d))
	}
	m := lsp.New(opts...)
	for _, t := range m.Tools() {
		w.registry.Register(t)
	}
	w.envHooks = append(w.envHooks, api.EnvHook(func(_ context.Context, env *tools.Env) {
		if env.Run != nil && env.Run.ID != "" {
			env.AfterWrite = m.AfterWrite(env)
		}
	}))
	w.runEnd = append(w.runEnd, func(r tools.Run) { m.RunEnded(r.ID) })
	w.closers = append(w.closers, m.Close)
	w.stats.lsp = m.Stats
	return nil
}
