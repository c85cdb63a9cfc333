package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Closed label sets of the tool families' gauges.
var (
	questionKinds = []string{"question", "permission"}
	workerStates  = []string{"running", "done", "failed", "killed"}
)

// Kernels is sandboxd_kernels{language}: counts maps a language to the live
// kernels sandboxd holds in it; languages is the configured set (any other
// language is counted under "other"). A tool family registers it as its
// own collector.
func Kernels(languages []string, counts func() map[string]int) prometheus.Collector {
	return newLabeledGauge("sandboxd_kernels", "Live eval kernels sandboxd is attached to, by language.",
		"language", languages, orNone(counts))
}

// LSP is sandboxd_lsp_servers{language} (running language servers) and
// sandboxd_lsp_restarts_total{language} (servers restarted after a crash
// since start), read at scrape time from the LSP manager.
func LSP(languages []string, servers func() map[string]int, restarts func() map[string]uint64) prometheus.Collector {
	if restarts == nil {
		restarts = func() map[string]uint64 { return nil }
	}
	return collectorList{
		newLabeledGauge("sandboxd_lsp_servers", "Running language servers by language.",
			"language", languages, orNone(servers)),
		&labeledCollector{
			desc: prometheus.NewDesc("sandboxd_lsp_restarts_total", "Language servers restarted after a crash, by language.",
				[]string{"language"}, nil),
			kind: prometheus.CounterValue, label: closedSet(languages),
			read: func() map[string]float64 {
				out := map[string]float64{}
				for k, v := range restarts() {
					out[k] = float64(v)
				}
				return out
			},
		},
	}
}

// DebugSessions is sandboxd_debug_sessions, read from n (nil: 0).
func DebugSessions(n func() int) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sandboxd_debug_sessions", Help: "Debug sessions alive.",
	}, func() float64 {
		if n == nil {
			return 0
		}
		return float64(n())
	})
}

// QuestionsPending is sandboxd_questions_pending{kind}; counts maps a kind
// ("question", "permission") to the questions waiting for an answer.
func QuestionsPending(counts func() map[string]int) prometheus.Collector {
	return newLabeledGauge("sandboxd_questions_pending", "Questions and permission requests waiting for an answer, by kind.",
		"kind", questionKinds, orNone(counts))
}

// Workers is sandboxd_workers{state}; counts maps a worker state (running,
// done, failed, killed) to the workers the manager knows in it.
func Workers(counts func() map[string]int) prometheus.Collector {
	return newLabeledGauge("sandboxd_workers", "Background workers known to sandboxd, by state.",
		"state", workerStates, orNone(counts))
}

// orNone reads as no counts (every series at zero) when counts is nil: a
// family that is off.
func orNone(counts func() map[string]int) func() map[string]int {
	if counts == nil {
		return func() map[string]int { return nil }
	}
	return counts
}

// collectorList is several collectors registered as one.
type collectorList []prometheus.Collector

func (l collectorList) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range l {
		c.Describe(ch)
	}
}

func (l collectorList) Collect(ch chan<- prometheus.Metric) {
	for _, c := range l {
		c.Collect(ch)
	}
}

// closedSet returns the label values exported: the known ones plus
// "other", so that every series exists even at zero.
func closedSet(known []string) []string {
	out := []string{}
	for _, k := range known {
		if k != "" && k != otherLabel && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return append(out, otherLabel)
}

func newLabeledGauge(name, help, label string, known []string, counts func() map[string]int) *labeledCollector {
	return &labeledCollector{
		desc: prometheus.NewDesc(name, help, []string{label}, nil),
		kind: prometheus.GaugeValue, label: closedSet(known),
		read: func() map[string]float64 {
			out := map[string]float64{}
			for k, v := range counts() {
				out[k] = float64(v)
			}
			return out
		},
	}
}

// labeledCollector exports one series per value of a closed label set,
// read from its owner at scrape time; values outside the set are summed
// under "other".
type labeledCollector struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	label []string // the closed set, "other" last
	read  func() map[string]float64
}

func (c *labeledCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *labeledCollector) Collect(ch chan<- prometheus.Metric) {
	sums := make(map[string]float64, len(c.label))
	for k, v := range c.read() {
		if !slices.Contains(c.label, k) {
			k = otherLabel
		}
		sums[k] += v
	}
	for _, l := range c.label {
		ch <- prometheus.MustNewConstMetric(c.desc, c.kind, sums[l], l)
	}
}
