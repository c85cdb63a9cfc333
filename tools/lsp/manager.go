// Package lsp holds the lsp and lsp_rename tools and diagnostics on write
// (DESIGN.md §4 "lsp", "lsp_rename", "Diagnostics on write"). Language
// servers run inside the conversation's sandbox, started through the
// sandbox agent and spoken to over their stdio streams; this package keeps
// one server per (sandbox, language, root) and one diagnostics ledger per run.
package lsp

import (
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// Manager supervises language servers for every sandbox and keeps the
// diagnostics ledgers of runs. Nothing starts until the first call.
//
// Goroutines: one watcher per supervisor that drops it when its agent
// session ends; each server's own goroutines (see server). Close drops the
// supervisors without stopping their servers: they belong to the agent and
// outlive sandboxd; the next sandboxd restarts them cleanly.
type Manager struct {
	cfg config

	mu      sync.Mutex // guards sups and ledgers
	sups    map[string]*supervisor
	ledgers map[string]*ledger

	// restartsMu guards restarts, crash restarts since start by language.
	// It is taken on its own, never while acquiring another lock, so a
	// supervisor may count under its own mutex.
	restartsMu sync.Mutex
	restarts   map[string]uint64
}

type config struct {
	langs          languages
	startTimeout   time.Duration
	requestTimeout time.Duration
	diagWait       time.Duration
	restartBudget  int
	restartWindow  time.Duration
	enabled        bool
	watch          bool
	refsCap        int
	symbolsCap     int
	docSymbolsCap  int
}

// Option configures a Manager.
type Option func(*config)

// WithLanguages adds languages (replacing built-ins of the same name).
func WithLanguages(ls ...*Language) Option {
	return func(c *config) { c.langs = merge(c.langs, ls) }
}

// WithStartTimeout caps a server's start and readiness (30 s).
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.startTimeout = d } }

// WithRequestTimeout caps one request to a server (20 s).
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.requestTimeout = d } }

// WithDiagnosticsWait caps how long a write waits for diagnostics (3 s).
func WithDiagnosticsWait(d time.Duration) Option { return func(c *config) { c.diagWait = d } }

// WithRestartBudget allows n restarts per root within window (3 per 10 min).
func WithRestartBudget(n int, window time.Duration) Option {
	return func(c *config) { c.restartBudget, c.restartWindow = n, window }
}

// WithWatch turns following the agent's workspace watch on or off (on).
// Off, changes made outside the write tools reach a server only through
// the disk reads of its open files at each call (the behaviour before the
// watch; benchmarks compare the two).
func WithWatch(on bool) Option { return func(c *config) { c.watch = on } }

// WithEnabled turns supervision on or off (on); off hides both tools.
func WithEnabled(on bool) Option { return func(c *config) { c.enabled = on } }

// New returns a Manager; it starts nothing.
func New(opts ...Option) *Manager {
	c := config{
		langs: DefaultLanguages(), startTimeout: 30 * time.Second, requestTimeout: 20 * time.Second,
		diagWait: 3 * time.Second, restartBudget: 3, restartWindow: 10 * time.Minute, enabled: true, watch: true,
		refsCap: 50, symbolsCap: 100, docSymbolsCap: 200,
	}
	for _, o := range opts {
		o(&c)
	}
	return &Manager{cfg: c, sups: map[string]*supervisor{}, ledgers: map[string]*ledger{}, restarts: map[string]uint64{}}
}

// Tools returns lsp and lsp_rename.
func (m *Manager) Tools() []tools.Tool {
	return []tools.Tool{&lspTool{m: m}, &renameTool{m: m}}
}

// available is the registration condition of both tools: supervision on
// and a run with a workdir.
func (m *Manager) available(env *tools.Env) bool {
	return m.cfg.enabled && env != nil && env.Run != nil && env.Run.Workdir != ""
}

func (m *Manager) why(env *tools.Env) string {
	switch {
	case m.available(env):
		return ""
	case !m.cfg.enabled:
		return "language-server supervision is off; only an operator can turn it on (lsp.enabled in sandboxd's config)"
	}
	return "the run has no workdir for language servers to find their project roots from; create the run with a workdir under /workspace"
}

// supervisor returns the sandbox's supervisor, creating it on first use.
// A supervisor bound to an older agent session is replaced: the servers it
// spoke to are unreachable through the new session's streams until
// re-attached, and their protocol state is not worth trusting, so the new
// supervisor restarts them cleanly.
func (m *Manager) supervisor(conn *tools.SandboxConn) *supervisor {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sups[conn.ID]; ok && s.agent == conn.Agent {
		return s
	}
	s := newSupervisor(m, conn)
	m.sups[conn.ID] = s
	go func() {
		<-conn.Agent.Done()
		m.mu.Lock()
		if m.sups[conn.ID] == s {
			delete(m.sups, conn.ID)
		}
		m.mu.Unlock()
		s.drop()
	}()
	return s
}

// Close forgets every supervisor. Servers keep running in their sandboxes:
// their streams are not closed here (closing stdin would end them); they
// end with the agent sessions, which the sandbox manager closes next.
func (m *Manager) Close() {
	m.mu.Lock()
	m.sups = map[string]*supervisor{}
	m.mu.Unlock()
}
