package chart

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxd/sandboxd/cluster"
	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools"
)

// metricName finds sandboxd's metric names in a PromQL expression; every
// metric sandboxd exports starts with sandboxd_, and no PromQL function,
// label or keyword does.
var metricName = regexp.MustCompile(`\bsandboxd_[a-zA-Z0-9_:]*`)

// TestDashboardMetricsExist reads every PromQL expression of the Grafana
// dashboard and checks that each metric it names is one that metrics.New
// registers, in the first scrape (before any event).
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
		"sandboxd_questions_pending", "sandboxd_workers",
		"sandboxd_replica_conversations_owned", "sandboxd_replica_handovers_total", "sandboxd_replica_forwarded_requests_total",
		"sandboxd_replica_lease_renew_failures_total", "sandboxd_replica_peers"} {
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

// exportedNames are the series names a first scrape of sandboxd shows:
// histogram families as _bucket, _sum and _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	series, err := ParseScrape(firstScrape(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for n := range series {
		out[n] = true
	}
	return out
}

// firstScrape is what GET /metrics returns from metrics wired as serve
// wires them, with replication on, before any tool call, pipe or run. Only
// the readiness probe has been served: HTTP series are born with the
// first request, and the probe's comes before any scrape.
func firstScrape(t *testing.T) string {
	t.Helper()
	return scrapeWith(t, func(reg prometheus.Registerer) { replicaMetrics(t, reg) })
}

// scrapeWith is firstScrape with the replica series registered by replicas.
func scrapeWith(t *testing.T, replicas func(prometheus.Registerer)) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	replicas(reg)
	none := func() map[string]int { return nil }
	m, err := metrics.New(reg, metrics.WithBackend("docker"), metrics.WithRunsActive(func() int { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	// What the daemon registers beside: the manager's series and every
	// family's, each at zero.
	reg.MustRegister(metrics.Sandboxes("docker", none),
		metrics.Kernels([]string{"python"}, nil),
		metrics.LSP([]string{"go"}, nil, nil),
		metrics.DebugSessions(nil),
		metrics.QuestionsPending(nil),
		metrics.Workers(nil),
		gateway.Collector())
	m.SetTools([]tools.Spec{{Name: "read", Level: tools.LevelRead}, {Name: "write", Level: tools.LevelWrite}, {Name: "shell", Level: tools.LevelExec}})
	m.ObserveHTTP("GET /readyz", "GET", 200, time.Millisecond)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// replicaMetrics registers package cluster's own metrics, as serve does
// with replication on.
func replicaMetrics(t *testing.T, reg prometheus.Registerer) {
	t.Helper()
	if _, err := cluster.NewMetrics(reg, func() int { return 0 }, func() int { return 1 }); err != nil {
		t.Fatal(err)
	}
}

// Replication marks the queries of the replica series (their panels say
// what a lone daemon shows): the lease alert and the replica panels, and
// nothing else.
func TestReplicationQueries(t *testing.T) {
	qs, err := Queries(".")
	if err != nil {
		t.Fatal(err)
	}
	var marked []string
	plain := 0
	for _, q := range qs {
		if q.Replication() {
			marked = append(marked, q.Where)
			continue
		}
		plain++
		if strings.Contains(q.Expr, "sandboxd_replica_") {
			t.Errorf("%s selects a replica metric and is not marked: %s", q.Where, q.Expr)
		}
	}
	for _, want := range []string{"alert SandboxdLeaseRenewFailing", "panel Conversations owned by replica", "panel Forwarded requests"} {
		if !slices.Contains(marked, want) {
			t.Errorf("%s is not marked as a replica query (marked: %v)", want, marked)
		}
	}
	if plain < 20 {
		t.Errorf("only %d of %d queries are left unmarked", plain, len(qs))
	}
}

// Every metric, label and label value the alerts and the dashboard select
// is in the first scrape, so no panel starts at "No data" and no alert
// waits on a series that never comes (the e2e test checks the same against
// the real daemon).
func TestQueriesMatchFirstScrape(t *testing.T) {
	qs, err := Queries(".")
	if err != nil {
		t.Fatal(err)
	}
	var alerts int
	for _, q := range qs {
		if strings.HasPrefix(q.Where, "alert ") {
			alerts++
		}
	}
	if alerts < 5 || len(qs)-alerts < 10 {
		t.Fatalf("found %d alert and %d dashboard queries, want the chart's", alerts, len(qs)-alerts)
	}
	problems, err := CheckScrape(qs, firstScrape(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// The tool error alert counts only sandboxd's own failures: a model's
// missing file (tool_error), bad arguments and a user's denial are not
// in its numerator.
func TestToolErrorAlertCountsFailuresOnly(t *testing.T) {
	qs, err := Queries(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Where != "alert SandboxdToolErrorRatio" {
			continue
		}
		num, _, ok := strings.Cut(q.Expr, "/")
		if !ok || !strings.Contains(num, `outcome="failure"`) {
			t.Errorf("numerator %q, want it to select outcome=\"failure\"", num)
		}
		for _, v := range []string{"tool_error", "invalid_arguments", "canceled", "outcome!=", "outcome=~"} {
			if strings.Contains(num, v) {
				t.Errorf("numerator %q counts %s", num, v)
			}
		}
		return
	}
	t.Error("no SandboxdToolErrorRatio alert")
}

// CheckScrape finds what is missing, so the tests above can fail.
func TestCheckScrapeFindsGaps(t *testing.T) {
	scrape := "# TYPE sandboxd_tool_calls_total counter\n" +
		`sandboxd_tool_calls_total{level="read",outcome="ok",tool="read"} 0` + "\n" +
		`sandboxd_http_requests_total{code="200",method="GET",route="GET /v1/sandboxes/{id}"} 3` + "\n"
	qs := []Query{
		{"a", `sum(rate(sandboxd_tool_calls_total{outcome="failure",namespace="x"}[5m]))`},
		{"b", `sum by (backend) (sandboxd_agent_reconnects_total)`},
		{"c", `sum by (state) (rate(sandboxd_tool_calls_total{outcome=~"ok|tool_error"}[1m]))`},
		{"d", `sum(rate(sandboxd_http_requests_total{code=~"5..",route!="GET /v1/sandboxes/{id}"}[1m]))`},
	}
	got, err := CheckScrape(qs, scrape)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`a: no series of sandboxd_tool_calls_total has outcome="failure" (it has [ok])`,
		"b: sandboxd_agent_reconnects_total is not in the scrape",
		"c: sandboxd_tool_calls_total has no label state to group by",
		`c: no series of sandboxd_tool_calls_total has outcome="tool_error" (it has [ok])`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("CheckScrape =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func TestParseScrape(t *testing.T) {
	got, err := ParseScrape("# HELP x y\n" +
		`sandboxd_http_requests_total{code="200",method="GET",route="GET /v1/sandboxes/{id}"} 3` + "\n" +
		`sandboxd_build_info{goversion="go1.26",version="a \"b\""} 1` + "\n" +
		"sandboxd_runs_active 2.5\n")
	if err != nil {
		t.Fatal(err)
	}
	if s := got["sandboxd_http_requests_total"]; len(s) != 1 || s[0].Value != 3 || s[0].Labels["route"] != "GET /v1/sandboxes/{id}" {
		t.Errorf("http sample = %+v", s)
	}
	if s := got["sandboxd_build_info"]; len(s) != 1 || s[0].Labels["version"] != `a "b"` {
		t.Errorf("build_info sample = %+v", s)
	}
	if s := got["sandboxd_runs_active"]; len(s) != 1 || s[0].Value != 2.5 || len(s[0].Labels) != 0 {
		t.Errorf("runs_active sample = %+v", s)
	}
	if _, err := ParseScrape(`sandboxd_x{a="b} 1`); err == nil {
		t.Error("an unclosed quote parsed")
	}
}
