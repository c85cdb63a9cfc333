package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sandboxd/sandboxd/tools"
)

// freshlyWired is Metrics as serve wires it, before any event.
func freshlyWired(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	src := &familySources{}
	m, reg := newTest(t, WithVersion("1.2.3"),
		withSandboxCounts("docker", func() map[string]int { return nil }),
		WithRunsActive(func() int { return 0 }), src.wired())
	m.SetTools(testSpecs)
	return m, reg
}

// A freshly wired Metrics exports every series of its closed label sets at
// zero, lint clean, before anything has happened: the dashboard and the
// alerts read 0, never "No data".
func TestFreshSeriesAtZero(t *testing.T) {
	_, reg := freshlyWired(t)
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
	var calls strings.Builder
	calls.WriteString(toolCallsHeader + "\n")
	for _, sp := range []tools.Spec{testSpecs[2], testSpecs[0], testSpecs[1]} { // by level, as the text format sorts
		for _, o := range []string{"canceled", "failure", "invalid_arguments", "ok", "tool_error"} {
			calls.WriteString(`sandboxd_tool_calls_total{level="` + string(sp.Level) + `",outcome="` + o + `",tool="` + sp.Name + "\"} 0\n")
		}
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(calls.String()+`
# HELP sandboxd_agent_pipes_open Open exec pipes to sandbox agents by backend.
# TYPE sandboxd_agent_pipes_open gauge
sandboxd_agent_pipes_open{backend="docker"} 0
# HELP sandboxd_agent_reconnects_total Agent pipes opened again after one dropped, by backend.
# TYPE sandboxd_agent_reconnects_total counter
sandboxd_agent_reconnects_total{backend="docker"} 0
# HELP sandboxd_runs_created_total Runs created through the API.
# TYPE sandboxd_runs_created_total counter
sandboxd_runs_created_total 0
# HELP sandboxd_sandboxes Sandboxes known to the manager by backend and state.
# TYPE sandboxd_sandboxes gauge
sandboxd_sandboxes{backend="docker",state="running"} 0
sandboxd_sandboxes{backend="docker",state="stopped"} 0
`), "sandboxd_tool_calls_total", "sandboxd_agent_pipes_open", "sandboxd_agent_reconnects_total",
		"sandboxd_runs_created_total", "sandboxd_sandboxes")
	if err != nil {
		t.Error(err)
	}
	// One duration histogram per tool, each empty.
	for _, mf := range mfs {
		if mf.GetName() != "sandboxd_tool_call_duration_seconds" {
			continue
		}
		if len(mf.GetMetric()) != len(testSpecs) {
			t.Errorf("duration histograms = %d, want one per tool (%d)", len(mf.GetMetric()), len(testSpecs))
		}
		for _, mt := range mf.GetMetric() {
			if h := mt.GetHistogram(); h.GetSampleCount() != 0 || len(h.GetBucket()) == 0 {
				t.Errorf("duration %v: count %d, %d buckets; want 0 and the buckets", mt.GetLabel(), h.GetSampleCount(), len(h.GetBucket()))
			}
		}
	}
	for _, n := range familyNames {
		if testutil.CollectAndCount(reg, n) == 0 {
			t.Errorf("%s has no series at start", n)
		}
	}
}

// A model's mistake and sandboxd's own failure land in different series,
// so an alert on failure ignores the first.
func TestToolErrorAndFailureApart(t *testing.T) {
	m, _ := freshlyWired(t)
	m.ObserveToolCall("read", tools.LevelRead, tools.OutcomeToolError, time.Millisecond)
	m.ObserveToolCall("read", tools.LevelRead, tools.OutcomeToolError, time.Millisecond)
	m.ObserveToolCall("shell", tools.LevelExec, tools.OutcomeFailure, time.Second)
	for _, c := range []struct {
		tool, level, outcome string
		want                 float64
	}{
		{"read", "read", "tool_error", 2}, {"read", "read", "failure", 0},
		{"shell", "exec", "failure", 1}, {"shell", "exec", "tool_error", 0},
	} {
		if v := testutil.ToFloat64(m.toolCalls.WithLabelValues(c.tool, c.level, c.outcome)); v != c.want {
			t.Errorf("%s %s = %v, want %v", c.tool, c.outcome, v, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.toolCalls); n != len(testSpecs)*len(outcomes) {
		t.Errorf("calls opened new series: %d, want %d", n, len(testSpecs)*len(outcomes))
	}
}
