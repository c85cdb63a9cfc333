package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
	err = testutil.GatherAndCompare(pr, strings.NewReader(`
# HELP sandboxd_debug_sessions Debug sessions alive.
# TYPE sandboxd_debug_sessions gauge
sandboxd_debug_sessions 0
# HELP sandboxd_kernels Live eval kernels sandboxd is attached to, by language.
# TYPE sandboxd_kernels gauge
sandboxd_kernels{language="javascript"} 0
sandboxd_kernels{language="other"} 0
sandboxd_kernels{language="python"} 0
# HELP sandboxd_questions_pending Questions and permission requests waiting for an answer, by kind.
# TYPE sandboxd_questions_pending gauge
sandboxd_questions_pending{kind="other"} 0
sandboxd_questions_pending{kind="permission"} 0
sandboxd_questions_pending{kind="question"} 0
# HELP sandboxd_workers Background workers known to sandboxd, by state.
# TYPE sandboxd_workers gauge
sandboxd_workers{state="done"} 0
sandboxd_workers{state="failed"} 0
sandboxd_workers{state="killed"} 0
sandboxd_workers{state="other"} 0
sandboxd_workers{state="running"} 0
`), "sandboxd_debug_sessions", "sandboxd_kernels", "sandboxd_questions_pending", "sandboxd_workers")
	if err != nil {
		t.Error(err)
	}
	mfs, err := pr.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var zig bool
	for _, mf := range mfs {
		if mf.GetName() != "sandboxd_lsp_servers" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "zig" && m.GetGauge().GetValue() == 0 {
				zig = true
			}
		}
	}
	if !zig {
		t.Errorf("sandboxd_lsp_servers{language=\"zig\"} 0 is missing: the configured language is not in the closed set")
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
