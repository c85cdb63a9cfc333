package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sandboxd/sandboxd/tools"
)

func newTest(t *testing.T, opts ...Option) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestNoLintProblems(t *testing.T) {
	m, reg := newTest(t, WithVersion("1.2.3"),
		WithSandboxCounts("docker", func() map[string]int { return map[string]int{"running": 2} }),
		WithRunsActive(func() int { return 3 }))
	// Touch every vector so each family has a series to lint.
	m.ObserveToolCall("read", tools.LevelRead, "ok", time.Millisecond)
	m.PipeOpened("docker")
	m.AgentReconnected("docker")
	m.RunCreated()
	m.ObserveHTTP("POST /v1/runs", "POST", 201, time.Millisecond)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	want := []string{"sandboxd_sandboxes", "sandboxd_runs_created_total", "sandboxd_runs_active",
		"sandboxd_tool_calls_total", "sandboxd_tool_call_duration_seconds", "sandboxd_agent_pipes_open",
		"sandboxd_agent_reconnects_total", "sandboxd_http_requests_total", "sandboxd_build_info"}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, n := range want {
		if !got[n] {
			t.Errorf("metric %s is missing", n)
		}
	}
}

func TestValues(t *testing.T) {
	counts := map[string]int{"running": 2, "stopped": 1}
	var mu sync.Mutex
	active := 4
	m, reg := newTest(t, WithVersion("v9"),
		WithSandboxCounts("host", func() map[string]int { return counts }),
		WithRunsActive(func() int { mu.Lock(); defer mu.Unlock(); return active }))

	m.ObserveToolCall("read", tools.LevelRead, "ok", 2*time.Millisecond)
	m.ObserveToolCall("read", tools.LevelRead, "ok", 3*time.Millisecond)
	m.ObserveToolCall("shell", tools.LevelExec, "tool_error", time.Second)
	m.RunCreated()
	m.PipeOpened("host")
	m.PipeOpened("host")
	m.PipeClosed("host")
	m.AgentReconnected("host")
	m.ObserveHTTP("GET /v1/sandboxes/{id}", "GET", 404, 0)
	m.ObserveHTTP("", "BREW", 404, 0)

	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sandboxd_sandboxes Sandboxes known to the manager by backend and state.
# TYPE sandboxd_sandboxes gauge
sandboxd_sandboxes{backend="host",state="running"} 2
sandboxd_sandboxes{backend="host",state="stopped"} 1
# HELP sandboxd_runs_active Runs that have not ended or expired.
# TYPE sandboxd_runs_active gauge
sandboxd_runs_active 4
# HELP sandboxd_runs_created_total Runs created through the API.
# TYPE sandboxd_runs_created_total counter
sandboxd_runs_created_total 1
# HELP sandboxd_tool_calls_total Finished tool calls by tool, level and outcome.
# TYPE sandboxd_tool_calls_total counter
sandboxd_tool_calls_total{level="exec",outcome="tool_error",tool="shell"} 1
sandboxd_tool_calls_total{level="read",outcome="ok",tool="read"} 2
# HELP sandboxd_agent_pipes_open Open exec pipes to sandbox agents by backend.
# TYPE sandboxd_agent_pipes_open gauge
sandboxd_agent_pipes_open{backend="host"} 1
# HELP sandboxd_agent_reconnects_total Agent pipes opened again after one dropped, by backend.
# TYPE sandboxd_agent_reconnects_total counter
sandboxd_agent_reconnects_total{backend="host"} 1
# HELP sandboxd_http_requests_total HTTP requests by status code, method and route pattern.
# TYPE sandboxd_http_requests_total counter
sandboxd_http_requests_total{code="404",method="GET",route="GET /v1/sandboxes/{id}"} 1
sandboxd_http_requests_total{code="404",method="other",route="unmatched"} 1
`), "sandboxd_sandboxes", "sandboxd_runs_active", "sandboxd_runs_created_total", "sandboxd_tool_calls_total",
		"sandboxd_agent_pipes_open", "sandboxd_agent_reconnects_total", "sandboxd_http_requests_total")
	if err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.toolDuration); n != 2 {
		t.Errorf("duration series = %d, want 2", n)
	}

	// Counts are read at scrape time: a change shows without any call.
	counts = map[string]int{"running": 5}
	mu.Lock()
	active = 0
	mu.Unlock()
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sandboxd_sandboxes Sandboxes known to the manager by backend and state.
# TYPE sandboxd_sandboxes gauge
sandboxd_sandboxes{backend="host",state="running"} 5
sandboxd_sandboxes{backend="host",state="stopped"} 0
# HELP sandboxd_runs_active Runs that have not ended or expired.
# TYPE sandboxd_runs_active gauge
sandboxd_runs_active 0
`), "sandboxd_sandboxes", "sandboxd_runs_active")
	if err != nil {
		t.Error(err)
	}
}

func TestBuildInfo(t *testing.T) {
	_, reg := newTest(t, WithVersion("1.0.0"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sandboxd_build_info" {
			continue
		}
		lbl := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			lbl[l.GetName()] = l.GetValue()
		}
		if lbl["version"] != "1.0.0" || !strings.HasPrefix(lbl["goversion"], "go") {
			t.Errorf("build_info labels = %v", lbl)
		}
		return
	}
	t.Error("sandboxd_build_info missing")
}

// Label values stay a closed set whatever callers pass.
func TestLabelsStayClosed(t *testing.T) {
	m, _ := newTest(t)
	for i := 0; i < 3*maxToolLabels; i++ {
		m.ObserveToolCall(fmt.Sprintf("tool_%d", i), tools.LevelRead, "ok", 0)
	}
	m.ObserveToolCall("conv-id/with:odd chars", "weird", "exploded", 0)
	if n := testutil.CollectAndCount(m.toolCalls); n > maxToolLabels+2 {
		t.Errorf("tool_calls series = %d, want at most %d", n, maxToolLabels+2)
	}
	if v := testutil.ToFloat64(m.toolCalls.WithLabelValues(otherLabel, otherLabel, otherLabel)); v != 1 {
		t.Errorf("odd labels not folded into %q: %v", otherLabel, v)
	}
}

// Two servers in one process (tests, embedders) must not clash.
func TestSeparateRegistries(t *testing.T) {
	newTest(t)
	newTest(t)
	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Error("registering twice on one registry did not fail")
	}
}
