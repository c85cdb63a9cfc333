package main

import (
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools/eval"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// familyStats holds the tool families' own counts for the metrics. The
// metrics are registered before the families are wired, so each wire
// function fills in its reader here; they are read at scrape time, after
// wiring. A family that is off leaves its reader nil and reads as zero.
type familyStats struct {
	kernels       func() map[string]int
	lsp           func() lsp.Stats
	debugSessions func() int
	questions     func() map[string]int
	workers       func() map[string]int
}

// familyMetrics returns the metrics options that export the families'
// counts through st.
func familyMetrics(cfg *config.Config, st *familyStats) []metrics.Option {
	counts := func(f *func() map[string]int) func() map[string]int {
		return func() map[string]int {
			if *f == nil {
				return nil
			}
			return (*f)()
		}
	}
	lspStats := func() lsp.Stats {
		if st.lsp == nil {
			return lsp.Stats{}
		}
		return st.lsp()
	}
	return []metrics.Option{
		metrics.WithKernels(eval.Languages(), counts(&st.kernels)),
		metrics.WithLSP(lspLanguages(cfg),
			func() map[string]int { return lspStats().Servers },
			func() map[string]uint64 { return lspStats().Restarts }),
		metrics.WithDebugSessions(func() int {
			if st.debugSessions == nil {
				return 0
			}
			return st.debugSessions()
		}),
		metrics.WithQuestionsPending(counts(&st.questions)),
		metrics.WithWorkers(counts(&st.workers)),
	}
}

// lspLanguages is the closed set of the language label: the built-in
// languages plus those the config adds, as wireLSP configures them.
func lspLanguages(cfg *config.Config) []string {
	var out []string
	for _, l := range lsp.DefaultLanguages() {
		out = append(out, l.Name)
	}
	for _, s := range cfg.LSP.Servers {
		out = append(out, s.Language)
	}
	return out
}
