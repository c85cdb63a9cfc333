// Package metrics holds sandboxd's Prometheus metrics. Everything registers
// on the Registerer passed to New, never on the global registry, so tests
// and embedders each get their own. No label ever carries a conversation,
// tenant, run or sandbox id: every label has a closed set of values.
package metrics

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// otherLabel replaces a label value outside the closed set.
const otherLabel = "other"

// maxToolLabels bounds the tool label: the registry only reports its own
// tools, but a wiring bug must not turn the label into an open set.
const maxToolLabels = 128

// outcomes is the closed set of the outcome label, in tools.Outcomes order.
var outcomes = tools.Outcomes()

var levels = map[string]bool{string(tools.LevelRead): true, string(tools.LevelWrite): true, string(tools.LevelExec): true}

var methods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// toolCallsHelp documents the outcome label, the one a tool error alert
// selects on.
const toolCallsHelp = "Finished tool calls by tool, level and outcome. outcome is ok; " +
	"invalid_arguments (the arguments failed the tool's schema); tool_error (an is_error answer the model can act on: " +
	"a missing file, a bad path, a refused approval or a user's denial); canceled (the caller left first); " +
	"failure (sandboxd's own: an internal error, the sandbox, its agent or the engine unavailable or gone, a deadline inside sandboxd)."

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

	// backend is the backend label's one known value ("" when none is
	// configured); any other value is counted under "other".
	backend string
	// tools maps each registered tool to its series. SetTools replaces the
	// map whole, so ObserveToolCall reads it without a lock.
	tools atomic.Pointer[map[string]*toolSeries]
}

// toolSeries are one tool's series, made once so that a call only adds.
type toolSeries struct {
	level    tools.Level
	calls    []prometheus.Counter // by index in outcomes
	duration prometheus.Observer
}

var (
	_ tools.CallObserver = (*Metrics)(nil)
	_ sandbox.Observer   = (*Metrics)(nil)
)

type options struct {
	version    string
	backend    string
	runsActive func() int
}

// Option configures New.
type Option func(*options)

// WithVersion sets the version label of sandboxd_build_info.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithBackend makes backend the closed set of the agent pipe metrics'
// backend label: their series exist at zero from the start. Register the
// manager's own series with Sandboxes once it exists.
func WithBackend(backend string) Option { return func(o *options) { o.backend = backend } }

// Sandboxes is sandboxd_sandboxes{backend,state}, read at scrape time from
// counts, which maps a state to the number of sandboxes in it (the
// manager's Counts).
func Sandboxes(backend string, counts func() map[string]int) prometheus.Collector {
	return &sandboxCollector{backend: backend, counts: counts}
}

// WithRunsActive exports sandboxd_runs_active from n, called at scrape time.
func WithRunsActive(n func() int) Option { return func(o *options) { o.runsActive = n } }

// New creates the metrics and registers them on reg. Every series of a
// closed label set known now exists at zero from the first scrape; the
// tool series follow with SetTools once the tools are registered.
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
			Name: "sandboxd_tool_calls_total", Help: toolCallsHelp,
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
		backend: o.backend,
	}
	m.tools.Store(&map[string]*toolSeries{})
	if o.backend != "" {
		m.pipesOpen.WithLabelValues(o.backend)
		m.reconnects.WithLabelValues(o.backend)
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sandboxd_build_info", Help: "Always 1; the labels name the build.",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(o.version, runtime.Version()).Set(1)

	cs := []prometheus.Collector{m.runsCreated, m.toolCalls, m.toolDuration, m.pipesOpen, m.reconnects, m.httpRequests, buildInfo}
	if o.runsActive != nil {
		n := o.runsActive
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_runs_active", Help: "Runs that have not ended or expired.",
		}, func() float64 { return float64(n()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetTools makes specs the tool label's closed set and creates each
// tool's series at zero: one per outcome at the tool's level, and its
// duration histogram. Call it once the registry holds every tool (before
// serving); a later call adds tools. Calls of any other tool are counted
// under "other".
func (m *Metrics) SetTools(specs []tools.Spec) {
	old := *m.tools.Load()
	next := make(map[string]*toolSeries, len(old)+len(specs))
	for k, v := range old {
		next[k] = v
	}
	for _, sp := range specs {
		if _, ok := next[sp.Name]; ok || len(next) >= maxToolLabels || !validToolName(sp.Name) || !levels[string(sp.Level)] {
			continue
		}
		s := &toolSeries{level: sp.Level, calls: make([]prometheus.Counter, len(outcomes)),
			duration: m.toolDuration.WithLabelValues(sp.Name, string(sp.Level))}
		for i, o := range outcomes {
			s.calls[i] = m.toolCalls.WithLabelValues(sp.Name, string(sp.Level), o)
		}
		next[sp.Name] = s
	}
	m.tools.Store(&next)
}

// ObserveToolCall records one finished tool call (tools.CallObserver). A
// registered tool's call only adds to series made by SetTools; anything
// else folds into "other" label values.
func (m *Metrics) ObserveToolCall(tool string, level tools.Level, outcome string, d time.Duration) {
	if s := (*m.tools.Load())[tool]; s != nil && s.level == level {
		if i := outcomeIndex(outcome); i >= 0 {
			s.calls[i].Inc()
			s.duration.Observe(d.Seconds())
			return
		}
	}
	if (*m.tools.Load())[tool] == nil {
		tool = otherLabel
	}
	lv := string(level)
	if !levels[lv] {
		lv = otherLabel
	}
	if outcomeIndex(outcome) < 0 {
		outcome = otherLabel
	}
	m.toolCalls.WithLabelValues(tool, lv, outcome).Inc()
	m.toolDuration.WithLabelValues(tool, lv).Observe(d.Seconds())
}

func outcomeIndex(o string) int {
	for i, v := range outcomes {
		if v == o {
			return i
		}
	}
	return -1
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
func (m *Metrics) PipeOpened(backend string) {
	m.pipesOpen.WithLabelValues(m.backendLabel(backend)).Inc()
}

// PipeClosed counts an agent pipe that closed (sandbox observer).
func (m *Metrics) PipeClosed(backend string) {
	m.pipesOpen.WithLabelValues(m.backendLabel(backend)).Dec()
}

// AgentReconnected counts a pipe opened again after a drop (sandbox observer).
func (m *Metrics) AgentReconnected(backend string) {
	m.reconnects.WithLabelValues(m.backendLabel(backend)).Inc()
}

// backendLabel keeps the backend label to the configured backend.
func (m *Metrics) backendLabel(b string) string {
	if b != m.backend {
		return otherLabel
	}
	return b
}

// RunCreated counts a run created through the API.
func (m *Metrics) RunCreated() { m.runsCreated.Inc() }

// ObserveHTTP counts one served request. route must be a pattern of the
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
