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

// testSpecs stand in for the registry's tools.
var testSpecs = []tools.Spec{
	{Name: "read", Level: tools.LevelRead}, {Name: "write", Level: tools.LevelWrite}, {Name: "shell", Level: tools.LevelExec},
}

const toolCallsHeader = "# HELP sandboxd_tool_calls_total " + toolCallsHelp + "\n# TYPE sandboxd_tool_calls_total counter"

// wired is what the daemon registers beside New's own series: the
// manager's sandboxd_sandboxes (with its backend as the pipe metrics'
// closed set) and the families' collectors.
type wired struct {
	opts []Option
	cs   []prometheus.Collector
}

func withCollectors(cs ...prometheus.Collector) wired { return wired{cs: cs} }

func withSandboxCounts(backend string, counts func() map[string]int) wired {
	return wired{opts: []Option{WithBackend(backend)}, cs: []prometheus.Collector{Sandboxes(backend, counts)}}
}

// newTest makes the metrics on a pedantic registry from New's options and
// what the daemon wires beside them (each an Option or a wired).
func newTest(t *testing.T, items ...any) (*Metrics, *prometheus.Registry) {
	t.Helper()
	var opts []Option
	var cs []prometheus.Collector
	for _, it := range items {
		switch it := it.(type) {
		case Option:
			opts = append(opts, it)
		case wired:
			opts, cs = append(opts, it.opts...), append(cs, it.cs...)
		default:
			t.Fatalf("newTest takes Options and wired, not %T", it)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return m, reg
}

func TestNoLintProblems(t *testing.T) {
	m, reg := newTest(t, WithVersion("1.2.3"),
		withSandboxCounts("docker", func() map[string]int { return map[string]int{"running": 2} }),
		WithRunsActive(func() int { return 3 }))
	m.SetTools(testSpecs)
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
		withSandboxCounts("host", func() map[string]int { return counts }),
		WithRunsActive(func() int { mu.Lock(); defer mu.Unlock(); return active }))
	m.SetTools(testSpecs)

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
`+toolCallsHeader+`
sandboxd_tool_calls_total{level="exec",outcome="canceled",tool="shell"} 0
sandboxd_tool_calls_total{level="exec",outcome="failure",tool="shell"} 0
sandboxd_tool_calls_total{level="exec",outcome="invalid_arguments",tool="shell"} 0
sandboxd_tool_calls_total{level="exec",outcome="ok",tool="shell"} 0
sandboxd_tool_calls_total{level="exec",outcome="tool_error",tool="shell"} 1
sandboxd_tool_calls_total{level="read",outcome="canceled",tool="read"} 0
sandboxd_tool_calls_total{level="read",outcome="failure",tool="read"} 0
sandboxd_tool_calls_total{level="read",outcome="invalid_arguments",tool="read"} 0
sandboxd_tool_calls_total{level="read",outcome="ok",tool="read"} 2
sandboxd_tool_calls_total{level="read",outcome="tool_error",tool="read"} 0
sandboxd_tool_calls_total{level="write",outcome="canceled",tool="write"} 0
sandboxd_tool_calls_total{level="write",outcome="failure",tool="write"} 0
sandboxd_tool_calls_total{level="write",outcome="invalid_arguments",tool="write"} 0
sandboxd_tool_calls_total{level="write",outcome="ok",tool="write"} 0
sandboxd_tool_calls_total{level="write",outcome="tool_error",tool="write"} 0
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
	if n := testutil.CollectAndCount(m.toolDuration); n != len(testSpecs) {
		t.Errorf("duration series = %d, want one per tool (%d)", n, len(testSpecs))
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
	m, _ := newTest(t, withSandboxCounts("docker", func() map[string]int { return nil }))
	var many []tools.Spec
	for i := 0; i < 3*maxToolLabels; i++ {
		many = append(many, tools.Spec{Name: fmt.Sprintf("tool_%d", i), Level: tools.LevelRead})
	}
	m.SetTools(append(many, tools.Spec{Name: "Bad Name", Level: tools.LevelRead}, tools.Spec{Name: "odd_level", Level: "root"}))
	if n := testutil.CollectAndCount(m.toolDuration); n != maxToolLabels {
		t.Errorf("tools with series = %d, want the cap %d", n, maxToolLabels)
	}
	m.ObserveToolCall("conv-id/with:odd chars", "weird", "exploded", 0)
	m.ObserveToolCall("never_registered", tools.LevelRead, "ok", 0)
	if n := testutil.CollectAndCount(m.toolCalls); n != maxToolLabels*len(outcomes)+2 {
		t.Errorf("tool_calls series = %d, want %d", n, maxToolLabels*len(outcomes)+2)
	}
	if v := testutil.ToFloat64(m.toolCalls.WithLabelValues(otherLabel, otherLabel, otherLabel)); v != 1 {
		t.Errorf("odd labels not folded into %q: %v", otherLabel, v)
	}
	if v := testutil.ToFloat64(m.toolCalls.WithLabelValues(otherLabel, "read", "ok")); v != 1 {
		t.Errorf("an unregistered tool not counted as %q: %v", otherLabel, v)
	}
	m.AgentReconnected("kubernetes")
	if v := testutil.ToFloat64(m.reconnects.WithLabelValues(otherLabel)); v != 1 {
		t.Errorf("a backend other than the configured one not folded into %q: %v", otherLabel, v)
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
