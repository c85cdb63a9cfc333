package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Every family exports its series from the first scrape, at zero when the
// config turns it off, and a language the config adds is part of the lsp
// label's closed set; the tools an off family leaves out say why.
func TestFamiliesExportTheirSeriesWhenOff(t *testing.T) {
	cfg, err := config.Parse([]byte(`
lsp:
  enabled: false
  servers:
    - {language: zig, command: [zls], extensions: [.zig], root_markers: [build.zig]}
eval: {disabled: true}
debug: {disabled: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	set := family.NewSet(families(api.NewRunTokens())...)
	if err := set.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	setup := &family.Setup{Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DataDir: t.TempDir(),
		Tools: reg, Runs: runstore.New()}
	if err := set.Register(setup); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	pr := prometheus.NewPedanticRegistry()
	if err := registerAll(pr, set.Collectors()...); err != nil {
		t.Fatal(err)
	}
	mfs, err := pr.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// Each family's series, by its label's values ("" for no label), every
	// one at zero; the lsp label's closed set holds the configured zig.
	want := map[string][]string{
		"sandboxd_debug_sessions":     {""},
		"sandboxd_kernels":            {"python", "javascript", "other"},
		"sandboxd_lsp_servers":        {"go", "python", "zig", "other"},
		"sandboxd_lsp_restarts_total": {"go", "zig", "other"},
		"sandboxd_questions_pending":  {"question", "permission", "other"},
		"sandboxd_workers":            {"running", "done", "failed", "killed", "other"},
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		vals := map[string]float64{}
		for _, m := range mf.GetMetric() {
			label := ""
			if len(m.GetLabel()) > 0 {
				label = m.GetLabel()[0].GetValue()
			}
			vals[label] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		got[mf.GetName()] = vals
	}
	for name, labels := range want {
		for _, l := range labels {
			v, ok := got[name][l]
			if !ok || v != 0 {
				t.Errorf("%s{%q} = %v (present %v), want 0 from the first scrape", name, l, v, ok)
			}
		}
	}
	// The tools of the families that are off are left out with a reason.
	said := map[string]string{}
	for _, u := range reg.Unavailable(&tools.Env{Run: &tools.Run{ID: "r", Surface: tools.SurfaceDefault}}) {
		for _, n := range u.Tools {
			said[n] = u.Reason
		}
	}
	for name, want := range map[string]string{"lsp": "lsp.enabled: false", "eval": "eval.disabled: true",
		"debug": "debug.disabled: true", "vibe_spawn": "workers:"} {
		if !strings.Contains(said[name], want) {
			t.Errorf("%s left out with reason %q, want one naming %q", name, said[name], want)
		}
	}
}
