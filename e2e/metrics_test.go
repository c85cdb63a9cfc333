package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxd/sandboxd/api"
	chart "github.com/sandboxd/sandboxd/helm/sandboxd"
	"github.com/sandboxd/sandboxd/tools"
)

// scrape sends GET /metrics as Prometheus would (no token).
func scrape(t *testing.T, d *daemon) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, d.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	return string(body)
}

// sampleValue is the value of name's one sample with exactly labels, or
// false when the scrape has none.
func sampleValue(t *testing.T, text, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	series, err := chart.ParseScrape(text)
	if err != nil {
		t.Fatal(err)
	}
next:
	for _, s := range series[name] {
		if len(s.Labels) != len(labels) {
			continue
		}
		for k, v := range labels {
			if s.Labels[k] != v {
				continue next
			}
		}
		return s.Value, true
	}
	return 0, false
}

func callsOf(t *testing.T, text string, spec tools.Spec, outcome string) (float64, bool) {
	t.Helper()
	return sampleValue(t, text, "sandboxd_tool_calls_total",
		map[string]string{"tool": spec.Name, "level": string(spec.Level), "outcome": outcome})
}

func specNamed(t *testing.T, specs []api.ToolSpec, name string) tools.Spec {
	t.Helper()
	for _, s := range specs {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("the run has no %s tool (it has %v)", name, toolNames(specs))
	return tools.Spec{}
}

// TestMetricsFirstScrape: the first scrape of a fresh daemon, before any
// sandbox, run or call, already has every series the chart's dashboard and
// alerts select, at zero: agent reconnects for the backend, and every tool
// call outcome of every tool a run is offered. A model's mistake (read of
// a missing file) then counts as tool_error, not as sandboxd's failure.
func TestMetricsFirstScrape(t *testing.T) {
	qs, err := chart.Queries("../helm/sandboxd")
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := startDaemon(t, backend, t.TempDir())
			first := scrape(t, d)

			for _, name := range []string{"sandboxd_agent_reconnects_total", "sandboxd_agent_pipes_open"} {
				if v, ok := sampleValue(t, first, name, map[string]string{"backend": backend}); !ok || v != 0 {
					t.Errorf("first scrape: %s{backend=%q} = %v (present %v), want 0", name, backend, v, ok)
				}
			}
			// The audit record's series are there from the first scrape
			// (records may already count the harness's own requests).
			for _, reason := range []string{"queue_full", "closed", "write_error"} {
				if v, ok := sampleValue(t, first, "sandboxd_audit_records_dropped_total", map[string]string{"reason": reason}); !ok || v != 0 {
					t.Errorf("first scrape: sandboxd_audit_records_dropped_total{reason=%q} = %v (present %v), want 0", reason, v, ok)
				}
			}
			for _, name := range []string{"sandboxd_audit_fsyncs_total", "sandboxd_audit_bytes_written_total", "sandboxd_audit_durable_timeouts_total"} {
				if _, ok := sampleValue(t, first, name, nil); !ok {
					t.Errorf("first scrape: %s is missing", name)
				}
			}
			if _, ok := sampleValue(t, first, "sandboxd_audit_records_written_total", map[string]string{"kind": "tool"}); !ok {
				t.Errorf("first scrape: sandboxd_audit_records_written_total{kind=\"tool\"} is missing")
			}
			// The webhooks' series too, with no webhook configured.
			for _, outcome := range []string{"delivered", "retried", "failed", "dropped"} {
				if v, ok := sampleValue(t, first, "sandboxd_webhook_deliveries_total", map[string]string{"outcome": outcome}); !ok || v != 0 {
					t.Errorf("first scrape: sandboxd_webhook_deliveries_total{outcome=%q} = %v (present %v), want 0", outcome, v, ok)
				}
			}
			problems, err := chart.CheckScrape(qs, first)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("first scrape: %s", p)
			}

			sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-metrics"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-metrics"})
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Tools) < 5 {
				t.Fatalf("the run offers %v, want the file tools at least", toolNames(run.Tools))
			}
			for _, spec := range run.Tools {
				for _, o := range tools.Outcomes() {
					if v, ok := callsOf(t, first, spec, o); !ok || v != 0 {
						t.Errorf("first scrape: sandboxd_tool_calls_total{tool=%q,level=%q,outcome=%q} = %v (present %v), want 0",
							spec.Name, spec.Level, o, v, ok)
					}
				}
				if v, ok := sampleValue(t, first, "sandboxd_tool_call_duration_seconds_count",
					map[string]string{"tool": spec.Name, "level": string(spec.Level)}); !ok || v != 0 {
					t.Errorf("first scrape: duration count of %s = %v (present %v), want 0", spec.Name, v, ok)
				}
			}

			read := specNamed(t, run.Tools, "read")
			if _, err := call(t, d, run.ID, "read", map[string]any{"path": "no/such/file.txt"}); err == nil {
				t.Fatal("read of a missing file did not answer is_error")
			}
			after := scrape(t, d)
			if v, _ := callsOf(t, after, read, tools.OutcomeToolError); v != 1 {
				t.Errorf("after a read of a missing file: tool_error = %v, want 1", v)
			}
			if v, _ := callsOf(t, after, read, tools.OutcomeFailure); v != 0 {
				t.Errorf("after a read of a missing file: failure = %v, want 0 (the model's mistake is not sandboxd's)", v)
			}
		})
	}
}

// TestMetricsFailureWhenSandboxRemoved: a call on a sandbox removed behind
// sandboxd's back counts as sandboxd's failure (what the tool error alert
// watches), not as the model's tool_error.
func TestMetricsFailureWhenSandboxRemoved(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	d := startDaemon(t, "docker", t.TempDir())
	conv := fmt.Sprintf("conv-metrics-gone-%d", time.Now().UnixNano())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", conv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	read := specNamed(t, run.Tools, "read")
	mustCall(t, d, run.ID, "write", map[string]any{"path": "a.txt", "content": "x"})
	mustCall(t, d, run.ID, "read", map[string]any{"path": "a.txt"})
	before := scrape(t, d)
	if v, _ := callsOf(t, before, read, tools.OutcomeOK); v != 1 {
		t.Fatalf("read ok = %v before the removal, want 1", v)
	}

	cli := dockerClient(t)
	list, err := cli.ContainerList(ctx(t), container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, c := range list {
		if c.Labels["io.sandboxd.conversation"] == conv {
			if err := cli.ContainerRemove(ctx(t), c.ID, container.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	if removed != 1 {
		t.Fatalf("removed %d containers of %s, want 1", removed, conv)
	}

	res, err := d.Client.CallTool(ctx(t), run.ID, "read", []byte(`{"path":"a.txt"}`))
	if err != nil {
		t.Fatalf("read in the removed sandbox: %v, want an is_error answer (the manager still listed the sandbox)", err)
	}
	if !res.IsError || !strings.Contains(res.Text(), "sandbox") {
		t.Fatalf("read in the removed sandbox = %+v, want an is_error answer naming the sandbox", res)
	}
	after := scrape(t, d)
	if v, _ := callsOf(t, after, read, tools.OutcomeFailure); v != 1 {
		t.Errorf("after a read in a removed sandbox (%q): failure = %v, want 1", res.Text(), v)
	}
	if v, _ := callsOf(t, after, read, tools.OutcomeToolError); v != 0 {
		t.Errorf("after a read in a removed sandbox: tool_error = %v, want 0", v)
	}
}
