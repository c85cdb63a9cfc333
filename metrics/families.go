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

// familyOptions holds the tool families' scrape-time sources. A nil source
// leaves its metric out.
type familyOptions struct {
	kernelLangs []string
	kernels     func() map[string]int

	lspLangs    []string
	lspServers  func() map[string]int
	lspRestarts func() map[string]uint64

	debugSessions func() int
	questions     func() map[string]int
	workers       func() map[string]int
}

// WithKernels exports sandboxd_kernels{language}: counts maps a language to
// the live kernels sandboxd holds in it; languages is the configured set
// (any other language is counted under "other").
func WithKernels(languages []string, counts func() map[string]int) Option {
	return func(o *options) { o.fam.kernelLangs, o.fam.kernels = languages, counts }
}

// WithLSP exports sandboxd_lsp_servers{language} (running language servers)
// and sandboxd_lsp_restarts_total{language} (servers restarted after a
// crash since start), both read at scrape time from the LSP manager.
func WithLSP(languages []string, servers func() map[string]int, restarts func() map[string]uint64) Option {
	return func(o *options) {
		o.fam.lspLangs, o.fam.lspServers, o.fam.lspRestarts = languages, servers, restarts
	}
}

// WithDebugSessions exports sandboxd_debug_sessions from n.
func WithDebugSessions(n func() int) Option { return func(o *options) { o.fam.debugSessions = n } }

// WithQuestionsPending exports sandboxd_questions_pending{kind}; counts maps
// a kind ("question", "permission") to the questions waiting for an answer.
func WithQuestionsPending(counts func() map[string]int) Option {
	return func(o *options) { o.fam.questions = counts }
}

// WithWorkers exports sandboxd_workers{state}; counts maps a worker state
// (running, done, failed, killed) to the workers the manager knows in it.
func WithWorkers(counts func() map[string]int) Option {
	return func(o *options) { o.fam.workers = counts }
}

// collectors returns one collector per configured source.
func (f familyOptions) collectors() []prometheus.Collector {
	var cs []prometheus.Collector
	if f.kernels != nil {
		cs = append(cs, newLabeledGauge("sandboxd_kernels", "Live eval kernels sandboxd is attached to, by language.",
			"language", f.kernelLangs, f.kernels))
	}
	if f.lspServers != nil {
		cs = append(cs, newLabeledGauge("sandboxd_lsp_servers", "Running language servers by language.",
			"language", f.lspLangs, f.lspServers))
	}
	if f.lspRestarts != nil {
		restarts := f.lspRestarts
		cs = append(cs, &labeledCollector{
			desc: prometheus.NewDesc("sandboxd_lsp_restarts_total", "Language servers restarted after a crash, by language.",
				[]string{"language"}, nil),
			kind: prometheus.CounterValue, label: closedSet(f.lspLangs),
			read: func() map[string]float64 {
				out := map[string]float64{}
				for k, v := range restarts() {
					out[k] = float64(v)
				}
				return out
			},
		})
	}
	if f.debugSessions != nil {
		n := f.debugSessions
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_debug_sessions", Help: "Debug sessions alive.",
		}, func() float64 { return float64(n()) }))
	}
	if f.questions != nil {
		cs = append(cs, newLabeledGauge("sandboxd_questions_pending", "Questions and permission requests waiting for an answer, by kind.",
			"kind", questionKinds, f.questions))
	}
	if f.workers != nil {
		cs = append(cs, newLabeledGauge("sandboxd_workers", "Background workers known to sandboxd, by state.",
			"state", workerStates, f.workers))
	}
	return cs
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
