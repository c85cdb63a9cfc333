package chart

import (
	"regexp"
	"slices"
	"testing"
)

// outsideMetrics are the series a rule may name that sandboxd does not
// export itself: Prometheus's own scrape health.
var outsideMetrics = regexp.MustCompile(`\bup\{`)

// TestRuleMetricsExist renders the PrometheusRule and checks that each
// alert the chart promises is there and that every sandboxd metric an
// expression names is one that metrics.New registers.
func TestRuleMetricsExist(t *testing.T) {
	objs := render(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
	rules, _ := get(must(t, objs, "PrometheusRule/sd-sandboxd"), "spec", "groups", "0", "rules").([]any)
	exported := exportedNames(t)
	var alerts []string
	for _, r := range rules {
		name, expr := str(r, "alert"), str(r, "expr")
		alerts = append(alerts, name)
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 && !outsideMetrics.MatchString(expr) {
			t.Errorf("alert %s: expression %q names no metric sandboxd exports", name, expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("alert %s uses %s, which sandboxd does not export (it exports %v)", name, n, keys(exported))
			}
		}
		if str(r, "for") == "" || str(r, "labels", "severity") == "" || str(r, "annotations", "summary") == "" {
			t.Errorf("alert %s lacks for, severity or summary: %v", name, r)
		}
	}
	for _, want := range []string{"SandboxdDown", "SandboxdToolErrorRatio", "SandboxdLSPRestartStorm", "SandboxdQuestionsPilingUp"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("the PrometheusRule lacks %s (it has %v)", want, alerts)
		}
	}
	// Alertmanager's own template reaches Prometheus, not Helm's expansion.
	for _, r := range rules {
		if str(r, "alert") == "SandboxdLSPRestartStorm" && !regexp.MustCompile(`^\{\{ \$labels\.language \}\} language servers`).MatchString(str(r, "annotations", "summary")) {
			t.Errorf("SandboxdLSPRestartStorm summary = %q, want it to start with {{ $labels.language }}", str(r, "annotations", "summary"))
		}
	}
	// Down fires on the ServiceMonitor's job both when the target is down
	// and when it is gone from Prometheus altogether.
	for _, r := range rules {
		if str(r, "alert") != "SandboxdDown" {
			continue
		}
		want := `up{job="sd-sandboxd",namespace="` + releaseNS + `"}`
		e := str(r, "expr")
		if !regexp.MustCompile(regexp.QuoteMeta(want)+`\s*== 0`).MatchString(e) || !regexp.MustCompile(`absent\(`+regexp.QuoteMeta(want)+`\)`).MatchString(e) {
			t.Errorf("SandboxdDown expr = %q, want %s == 0 or absent(%s)", e, want, want)
		}
	}
}
