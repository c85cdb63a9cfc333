package lsp

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	sbxconfig "github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is lsp and lsp_rename as a tool family, with diagnostics on write
// plugged into every run's write tools. Nothing starts at Register:
// servers start on the first call that needs one.
func Family() family.Family { return &fam{} }

type fam struct {
	family.Base
	langs []string // the language label's closed set
	m     *Manager // nil while lsp is off
}

func (*fam) Name() string { return "lsp" }

func (*fam) Validate(cfg *sbxconfig.Config) error { return cfg.LSP.Check() }

func (f *fam) Register(s *family.Setup) error {
	c := s.Config.LSP
	for _, l := range DefaultLanguages() {
		f.langs = append(f.langs, l.Name)
	}
	for _, sv := range c.Servers {
		f.langs = append(f.langs, sv.Language)
	}
	if !c.On() {
		s.Omit("language-server supervision is off in this sandboxd's config (lsp.enabled: false); only an operator can turn it on", "lsp", "lsp_rename")
		return nil
	}
	var opts []Option
	for _, sv := range c.Servers {
		id := sv.LanguageID
		if id == "" {
			id = sv.Language
		}
		opts = append(opts, WithLanguages(&Language{
			Name: sv.Language, Commands: [][]string{sv.Command}, Extensions: sv.Extensions, RootMarkers: sv.RootMarkers,
			DefaultID: id, Quiet: 300,
		}))
	}
	if d := c.StartTimeout.D(); d > 0 {
		opts = append(opts, WithStartTimeout(d))
	}
	if d := c.RequestTimeout.D(); d > 0 {
		opts = append(opts, WithRequestTimeout(d))
	}
	if d := c.DiagnosticsWait.D(); d > 0 {
		opts = append(opts, WithDiagnosticsWait(d))
	}
	f.m = New(opts...)
	s.Register(f.m.Tools()...)
	s.EnvHook(func(_ context.Context, env *tools.Env) {
		if env.Run != nil && env.Run.ID != "" {
			env.AfterWrite = f.m.AfterWrite(env)
		}
	})
	return nil
}

func (f *fam) Collector() prometheus.Collector {
	stats := func() Stats {
		if f.m == nil {
			return Stats{}
		}
		return f.m.Stats()
	}
	return metrics.LSP(f.langs,
		func() map[string]int { return stats().Servers },
		func() map[string]uint64 { return stats().Restarts })
}

func (f *fam) RunEnded(r tools.Run) {
	if f.m != nil {
		f.m.RunEnded(r.ID)
	}
}

func (f *fam) Close() error {
	if f.m != nil {
		f.m.Close()
	}
	return nil
}
