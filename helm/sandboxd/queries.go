package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// Query is one PromQL expression the chart ships.
type Query struct {
	Where string // "alert NAME" or "panel TITLE"
	Expr  string
}

// replicaMetric is the prefix of the replica series: a replicated sandboxd
// (config replication.enabled) reports its leases and forwarding in them,
// a lone daemon the values true of it (one replica owning everything).
const replicaMetric = "sandboxd_replica_"

// Replication reports whether q selects a replica series, whose values
// mean most with replication on.
func (q Query) Replication() bool { return strings.Contains(q.Expr, replicaMetric) }

// Queries renders the chart in dir with its PrometheusRule enabled and
// returns the expression of every alert, then every PromQL expression of
// the Grafana dashboard (panel targets and template variables). The
// default values turn replication on, so the replicas' alert is among them
// (see Query.Replication).
func Queries(dir string) ([]Query, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load the chart: %w", err)
	}
	vals := map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "sd", Namespace: "sandboxd", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		return nil, fmt.Errorf("render the chart: %w", err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Expr string }
			}
		}
	}
	if err := yaml.Unmarshal([]byte(files[c.Name()+"/templates/prometheusrule.yaml"]), &rule); err != nil {
		return nil, fmt.Errorf("the PrometheusRule: %w", err)
	}
	var out []Query
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, Query{Where: "alert " + r.Alert, Expr: r.Expr})
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "dashboards", "sandboxd.json"))
	if err != nil {
		return nil, err
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		return nil, fmt.Errorf("the dashboard is not valid JSON: %w", err)
	}
	dashboardQueries(dash, "dashboard", &out)
	if len(out) == 0 {
		return nil, fmt.Errorf("the chart in %s ships no alert or dashboard query", dir)
	}
	return out, nil
}

func dashboardQueries(v any, where string, out *[]Query) {
	switch x := v.(type) {
	case map[string]any:
		if t, ok := x["title"].(string); ok && x["type"] != nil {
			where = "panel " + t
		}
		if n, ok := x["name"].(string); ok && x["definition"] != nil {
			where = "variable " + n
		}
		for k, c := range x {
			if s, ok := c.(string); ok && (k == "expr" || k == "definition") {
				*out = append(*out, Query{Where: where, Expr: s})
			}
			dashboardQueries(c, where, out)
		}
	case []any:
		for _, c := range x {
			dashboardQueries(c, where, out)
		}
	}
}

// targetLabels are added by Prometheus to what it scrapes; a scrape of
// sandboxd itself never carries them.
var targetLabels = []string{"instance", "job", "namespace", "pod", "service", "endpoint", "container"}

var (
	seriesName = regexp.MustCompile(`\bsandboxd_[a-zA-Z0-9_:]*`)
	byClause   = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	matcherRe  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)
	// literalAlternation is a regex matcher that only lists values.
	literalAlternation = regexp.MustCompile(`^[a-zA-Z0-9_]+(\|[a-zA-Z0-9_]+)*$`)
)

// CheckScrape returns one message for each metric, label or label value
// that a query selects and scrape (the Prometheus text format, as GET
// /metrics returns) lacks. Label values are checked where a matcher names
// them literally (=, !=, or a regex that only lists values); patterns
// such as "5.." and Grafana variables are left alone.
func CheckScrape(qs []Query, scrape string) ([]string, error) {
	series, err := ParseScrape(scrape)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, q := range qs {
		var by []string
		for _, m := range byClause.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(targetLabels, l) {
					by = append(by, l)
				}
			}
		}
		for _, loc := range seriesName.FindAllStringIndex(q.Expr, -1) {
			name := q.Expr[loc[0]:loc[1]]
			have := series[name]
			if len(have) == 0 {
				problems = append(problems, fmt.Sprintf("%s: %s is not in the scrape", q.Where, name))
				continue
			}
			for _, l := range by {
				if len(valuesOf(have, l)) == 0 {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s to group by", q.Where, name, l))
				}
			}
			body, ok := selectorBody(q.Expr[loc[1]:])
			if !ok {
				continue
			}
			for _, part := range splitMatchers(body) {
				m := matcherRe.FindStringSubmatch(part)
				if m == nil {
					problems = append(problems, fmt.Sprintf("%s: cannot read the matcher %q of %s", q.Where, part, name))
					continue
				}
				label, op, val := m[1], m[2], m[3]
				if slices.Contains(targetLabels, label) {
					continue
				}
				got := valuesOf(have, label)
				if len(got) == 0 {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s", q.Where, name, label))
					continue
				}
				var want []string
				switch {
				case strings.Contains(val, "$"):
				case op == "=" || op == "!=":
					want = []string{val}
				case literalAlternation.MatchString(val):
					want = strings.Split(val, "|")
				}
				for _, w := range want {
					if !slices.Contains(got, w) {
						problems = append(problems, fmt.Sprintf("%s: no series of %s has %s=%q (it has %v)", q.Where, name, label, w, got))
					}
				}
			}
		}
	}
	return problems, nil
}

// selectorBody returns what is between the braces that open rest, if any.
func selectorBody(rest string) (string, bool) {
	if !strings.HasPrefix(rest, "{") {
		return "", false
	}
	quoted := false
	for i := 1; i < len(rest); i++ {
		switch c := rest[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == '}' && !quoted:
			return rest[1:i], true
		}
	}
	return "", false
}

// splitMatchers splits a selector body at the commas outside quotes.
func splitMatchers(body string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, body[start:i])
			start = i + 1
		}
	}
	if strings.TrimSpace(body[start:]) != "" {
		out = append(out, body[start:])
	}
	return out
}

func valuesOf(series []Sample, label string) []string {
	var out []string
	for _, s := range series {
		if v, ok := s.Labels[label]; ok && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// Sample is one line of a scrape.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// ParseScrape reads the Prometheus text format into each sample name's
// samples (a histogram's under their _bucket, _sum and _count names).
func ParseScrape(text string) (map[string][]Sample, error) {
	out := map[string][]Sample{}
	for n, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end <= 0 {
			return nil, fmt.Errorf("scrape line %d has no value: %q", n+1, line)
		}
		name, rest, labels := line[:end], line[end:], map[string]string{}
		if rest[0] == '{' {
			var err error
			if labels, rest, err = parseLabels(rest[1:]); err != nil {
				return nil, fmt.Errorf("scrape line %d: %w: %q", n+1, err, line)
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("scrape line %d has no value: %q", n+1, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("scrape line %d: %w", n+1, err)
		}
		out[name] = append(out[name], Sample{Labels: labels, Value: v})
	}
	return out, nil
}

// parseLabels reads `k="v",...}` from the start of s and returns what
// follows the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	out := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			return out, rest, nil
		}
		eq := strings.Index(s, `="`)
		if eq <= 0 {
			return nil, "", fmt.Errorf("a label without a quoted value")
		}
		key := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				if s[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(s[i])
		}
		if i == len(s) {
			return nil, "", fmt.Errorf("label %s has no closing quote", key)
		}
		out[key] = v.String()
		s = s[i+1:]
	}
}
