package chart

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools"
)

// metricName finds sandboxd's metric names in a PromQL expression; every
// metric sandboxd exports starts with sandboxd_, and no PromQL function,
// label or keyword does.
var metricName = regexp.MustCompile(`\bsandboxd_[a-zA-Z0-9_:]*`)

// TestDashboardMetricsExist reads every PromQL expression of the Grafana
// dashboard and checks that each metric it names is one that metrics.New
// registers (gathered from a fresh registry after one event of each kind).
func TestDashboardMetricsExist(t *testing.T) {
	data, err := os.ReadFile("dashboards/sandboxd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if dash["title"] == "" || dash["uid"] == "" {
		t.Errorf("the dashboard has no title or uid")
	}
	var exprs []string
	collectExprs(dash, &exprs)
	if len(exprs) < 10 {
		t.Fatalf("found %d PromQL expressions, want the dashboard's panels", len(exprs))
	}

	exported := exportedNames(t)
	used := map[string]bool{}
	for _, e := range exprs {
		names := metricName.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("expression %q names no sandboxd metric", e)
		}
		for _, n := range names {
			used[n] = true
			if !exported[n] {
				t.Errorf("expression %q uses %s, which sandboxd does not export (it exports %v)", e, n, keys(exported))
			}
		}
	}
	// The panels cover each family at least once.
	for _, fam := range []string{"sandboxd_sandboxes", "sandboxd_tool_calls_total", "sandboxd_tool_call_duration_seconds_bucket",
		"sandboxd_agent_pipes_open", "sandboxd_agent_reconnects_total", "sandboxd_http_requests_total", "sandboxd_runs_active",
		"sandboxd_kernels", "sandboxd_lsp_servers", "sandboxd_lsp_restarts_total", "sandboxd_debug_sessions",
		"sandboxd_questions_pending", "sandboxd_workers"} {
		if !used[fam] {
			t.Errorf("no panel queries %s", fam)
		}
	}
}

// collectExprs gathers the "expr" of targets and the "query" strings of
// template variables.
func collectExprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s, ok := c.(string); ok && (k == "expr" || k == "definition") {
				*out = append(*out, s)
			}
			collectExprs(c, out)
		}
	case []any:
		for _, c := range x {
			collectExprs(c, out)
		}
	}
}

// exportedNames are the series names a scrape of sandboxd shows: histogram
// families as _bucket, _sum and _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	none := func() map[string]int { return nil }
	m, err := metrics.New(reg,
		metrics.WithSandboxCounts("docker", func() map[string]int { return map[string]int{"running": 1} }),
		metrics.WithRunsActive(func() int { return 1 }),
		metrics.WithKernels([]string{"python"}, none),
		metrics.WithLSP([]string{"go"}, none, func() map[string]uint64 { return nil }),
		metrics.WithDebugSessions(func() int { return 0 }),
		metrics.WithQuestionsPending(none),
		metrics.WithWorkers(none))
	if err != nil {
		t.Fatal(err)
	}
	// Vectors show up only once they have a child.
	m.ObserveToolCall("read_file", tools.LevelRead, "ok", time.Millisecond)
	m.PipeOpened("docker")
	m.AgentReconnected("docker")
	m.RunCreated()
	m.ObserveHTTP("GET /healthz", "GET", 200, time.Millisecond)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		n := f.GetName()
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[n+s] = true
			}
			continue
		}
		out[n] = true
	}
	return out
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}
