// Package metrics holds sandboxd's Prometheus metrics. Everything registers
// on the Registerer passed to New, never on the global registry, so tests
// and embedders each get their own. No label ever carries a conversation,
// tenant, run or sandbox id: every label has a closed set of values.
package metrics

import (
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// otherLabel replaces a label value outside the closed set.
const otherLabel = "other"

// maxToolLabels bounds the tool label: the registry only reports its own
// tools, but a bug must not turn the label into an open set.
const maxToolLabels = 128

// Outcomes a tool call can have (tools.CallObserver).
var outcomes = map[string]bool{"ok": true, "tool_error": true, "invalid_arguments": true, "internal_error": true, "canceled": true}

var levels = map[string]bool{string(tools.LevelRead): true, string(tools.LevelWrite): true, string(tools.LevelExec): true}

var methods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// Metrics implements tools.CallObserver, the sandbox manager's observer
// (PipeOpened, PipeClosed, AgentReconnected) and the API's observer
// (ObserveHTTP, RunCreated). It starts no goroutines.
type Metrics struct {
	runsCreated  prometheus.Counter
	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
	pipesOpen    *prometheus.GaugeVec
	reconnects   *prometheus.CounterVec
	httpRequests *prometheus.CounterVec

	// mu guards toolNames, the tool label values seen so far.
	mu        sync.Mutex
	toolNames map[string]bool
}

var (
	_ tools.CallObserver = (*Metrics)(nil)
	_ sandbox.Observer   = (*Metrics)(nil)
)

type options struct {
	version    string
	backend    string
	counts     func() map[string]int
	runsActive func() int
	fam        familyOptions
}

// Option configures New.
type Option func(*options)

// WithVersion sets the version label of sandboxd_build_info.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithSandboxCounts exports sandboxd_sandboxes{backend,state} from counts,
// which maps a state to the number of sandboxes in it (the manager's Counts).
func WithSandboxCounts(backend string, counts func() map[string]int) Option {
	return func(o *options) { o.backend, o.counts = backend, counts }
}

// WithRunsActive exports sandboxd_runs_active from n, called at scrape time.
func WithRunsActive(n func() int) Option { return func(o *options) { o.runsActive = n } }

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	o := options{version: "dev"}
	for _, opt := range opts {
		opt(&o)
	}
	m := &Metrics{
		runsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sandboxd_runs_created_total", Help: "Runs created through the API.",
		}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_tool_calls_total", Help: "Finished tool calls by tool, level and outcome.",
		}, []string{"tool", "level", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxd_tool_call_duration_seconds",
			Help:    "Duration of tool calls by tool and level.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool", "level"}),
		pipesOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sandboxd_agent_pipes_open", Help: "Open exec pipes to sandbox agents by backend.",
		}, []string{"backend"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_agent_reconnects_total", Help: "Agent pipes opened again after one dropped, by backend.",
		}, []string{"backend"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_http_requests_total", Help: "HTTP requests by status code, method and route pattern.",
		}, []string{"code", "method", "route"}),
		toolNames: map[string]bool{},
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sandboxd_build_info", Help: "Always 1; the labels name the build.",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(o.version, runtime.Version()).Set(1)

	cs := []prometheus.Collector{m.runsCreated, m.toolCalls, m.toolDuration, m.pipesOpen, m.reconnects, m.httpRequests, buildInfo}
	if o.counts != nil {
		cs = append(cs, &sandboxCollector{backend: o.backend, counts: o.counts})
	}
	if o.runsActive != nil {
		n := o.runsActive
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_runs_active", Help: "Runs that have not ended or expired.",
		}, func() float64 { return float64(n()) }))
	}
	cs = append(cs, o.fam.collectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveToolCall records one finished tool call (tools.CallObserver).
func (m *Metrics) ObserveToolCall(tool string, level tools.Level, outcome string, d time.Duration) {
	tool = m.toolLabel(tool)
	lv := string(level)
	if !levels[lv] {
		lv = otherLabel
	}
	if !outcomes[outcome] {
		outcome = otherLabel
	}
	m.toolCalls.WithLabelValues(tool, lv, outcome).Inc()
	m.toolDuration.WithLabelValues(tool, lv).Observe(d.Seconds())
}

func (m *Metrics) toolLabel(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.toolNames[name] {
		return name
	}
	if len(m.toolNames) >= maxToolLabels || !validToolName(name) {
		return otherLabel
	}
	m.toolNames[name] = true
	return name
}

func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// PipeOpened counts an agent pipe that opened (sandbox observer).
func (m *Metrics) PipeOpened(backend string) { m.pipesOpen.WithLabelValues(backend).Inc() }

// PipeClosed counts an agent pipe that closed (sandbox observer).
func (m *Metrics) PipeClosed(backend string) { m.pipesOpen.WithLabelValues(backend).Dec() }

// AgentReconnected counts a pipe opened again after a drop (sandbox observer).
func (m *Metrics) AgentReconnected(backend string) { m.reconnects.WithLabelValues(backend).Inc() }

// RunCreated counts a run created through the API.
func (m *Metrics) RunCreated() { m.runsCreated.Inc() }

// ObserveHTTP counts one answered request. route must be a pattern of the
// API's mux (a closed set), never a raw path; "" means no route matched.
func (m *Metrics) ObserveHTTP(route, method string, code int, _ time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	if !methods[method] {
		method = otherLabel
	}
	m.httpRequests.WithLabelValues(strconv.Itoa(code), method, route).Inc()
}

// sandboxCollector reads the manager's counts at scrape time, so the metric
// never drifts from the manager's own view.
type sandboxCollector struct {
	backend string
	counts  func() map[string]int
}

var sandboxesDesc = prometheus.NewDesc("sandboxd_sandboxes", "Sandboxes known to the manager by backend and state.", []string{"backend", "state"}, nil)

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxesDesc }

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.counts()
	// The usual states are always exported, so a dashboard sees 0 rather
	// than a missing series.
	for _, s := range []string{"running", "stopped"} {
		if _, ok := counts[s]; !ok {
			ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, 0, c.backend, s)
		}
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), c.backend, state)
	}
}
