package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// The readers the wire functions fill in are the ones scraped, and a
// language the config adds is part of the closed set.
func TestFamilyMetricsReadWiredCounts(t *testing.T) {
	cfg := &config.Config{}
	cfg.LSP.Servers = []config.LSPServer{{Language: "zig"}}
	st := &familyStats{}
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.New(reg, familyMetrics(cfg, st)...); err != nil {
		t.Fatal(err)
	}
	st.lsp = func() lsp.Stats {
		return lsp.Stats{Servers: map[string]int{"zig": 2, "go": 1}, Restarts: map[string]uint64{"zig": 4}}
	}
	st.questions = func() map[string]int { return map[string]int{"permission": 3} }
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sandboxd_lsp_restarts_total Language servers restarted after a crash, by language.
# TYPE sandboxd_lsp_restarts_total counter
`+zeroExcept("sandboxd_lsp_restarts_total", "language", lspLanguages(cfg), map[string]string{"zig": "4"})+`
# HELP sandboxd_questions_pending Questions and permission requests waiting for an answer, by kind.
# TYPE sandboxd_questions_pending gauge
sandboxd_questions_pending{kind="other"} 0
sandboxd_questions_pending{kind="permission"} 3
sandboxd_questions_pending{kind="question"} 0
`), "sandboxd_lsp_restarts_total", "sandboxd_questions_pending")
	if err != nil {
		t.Error(err)
	}
	if v := gaugeValue(t, reg, "sandboxd_lsp_servers", "zig"); v != 2 {
		t.Errorf("zig servers = %v, want 2", v)
	}
}

// zeroExcept renders one series per language (plus "other"), 0 unless set.
func zeroExcept(name, label string, values []string, set map[string]string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, v := range append(values, "other") {
		if seen[v] {
			continue
		}
		seen[v] = true
		n := "0"
		if s, ok := set[v]; ok {
			n = s
		}
		b.WriteString(name + "{" + label + `="` + v + `"} ` + n + "\n")
	}
	return b.String()
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name, language string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == language {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("%s{language=%q} missing", name, language)
	return 0
}
