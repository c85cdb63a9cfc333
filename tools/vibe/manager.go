package vibe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Worker states.
const (
	StateRunning = "running"
	StateDone    = "done"
	StateFailed  = "failed"
	StateKilled  = "killed"
)

// Tiers.
const (
	TierFast = "fast"
	TierGood = "good"
)

// Defaults.
const (
	DefaultMaxPerRun = 8
	maxBriefBytes    = 256 << 10
)

// Runs is what workers need of the run store: a child run per worker.
type Runs interface {
	Create(ctx context.Context, run tools.Run) (tools.Run, error)
}

// Tokens issues the run-scoped token a worker calls sandboxd with.
type Tokens interface {
	Issue(tenant, run string) (string, error)
	Revoke(run string)
}

// Config is what the manager is built from.
type Config struct {
	// Commands per tier ("fast", "good"); a tier absent here is not offered.
	Commands map[string][]string
	// MaxPerRun bounds the workers one run may have (all states).
	MaxPerRun int
	// URL returns sandboxd's address as the spawning call reached it (the
	// worker's SANDBOXD_URL).
	URL func(ctx context.Context) string
	// HostDir is where workers of conversations without a sandbox run.
	HostDir string
	// Handler returns sandboxd's API handler. With it, a worker in a
	// sandbox reaches the API through a relay inside the sandbox (it needs
	// no network); without it (nil, or returning nil) the worker gets URL.
	Handler func() http.Handler
}

// Manager runs background workers. Goroutines: one per running attempt,
// which owns that attempt's process (in the sandbox through the agent, or
// on the host) and settles the worker when it ends. Shutdown: Close
// cancels every attempt (killing its process group) and waits for the
// attempt goroutines, bounded.
type Manager struct {
	cfg    Config
	runs   Runs
	tokens Tokens
	now    func() time.Time
	host   runner // for conversations without a sandbox
	// inSandbox makes a runner over the sandbox's agent (tests replace it).
	inSandbox func(conn *tools.SandboxConn) runner

	mu      sync.Mutex         // guards workers, perRun and closed, and every worker's mutable fields
	workers map[string]*worker // by parent run id + "/" + worker id
	perRun  map[string]int     // workers ever spawned per parent run (ids and the bound)
	closed  bool

	attempts sync.WaitGroup
}

type worker struct {
	id, label, tier string
	tenant          string
	parent          string // the spawning run
	child           tools.Run
	env             *tools.Env // the parent's env (how to reach the sandbox)
	url             string

	brief   string
	state   string
	result  string
	started time.Time // of the current attempt
	ended   time.Time
	attempt int
	cancel  context.CancelFunc
	killed  bool          // the current attempt was ended by kill, send or run end
	settled chan struct{} // closed when the current attempt settles
	live    workerLive    // the output, to the vibe_wait calls that stream it
}

// NewManager returns a manager; it starts nothing until a worker spawns.
func NewManager(cfg Config, runs Runs, tokens Tokens) *Manager {
	if cfg.MaxPerRun <= 0 {
		cfg.MaxPerRun = DefaultMaxPerRun
	}
	if cfg.HostDir == "" {
		cfg.HostDir = os.TempDir()
	}
	return &Manager{
		cfg: cfg, runs: runs, tokens: tokens, now: time.Now,
		host:      hostRunner(os.Environ()),
		inSandbox: func(conn *tools.SandboxConn) runner { return sandboxRunner(conn.Agent) },
		workers:   map[string]*worker{},
		perRun:    map[string]int{},
	}
}

// Tiers lists the configured tiers, fast first.
func (m *Manager) Tiers() []string {
	var out []string
	for _, t := range []string{TierFast, TierGood} {
		if len(m.cfg.Commands[t]) > 0 {
			out = append(out, t)
		}
	}
	return out
}

func key(parent, id string) string { return parent + "/" + id }

// Spawn starts a worker for the run in env and returns its id at once.
func (m *Manager) Spawn(ctx context.Context, env *tools.Env, brief, label, tier string) (string, error) {
	parent := env.Run
	if tier == "" {
		tier = m.Tiers()[0]
	}
	if len(m.cfg.Commands[tier]) == 0 {
		return "", errdefs.InvalidArgument("tier %q has no worker command configured; use one of %s", tier, strings.Join(m.Tiers(), ", "))
	}
	if len(brief) > maxBriefBytes {
		return "", errdefs.InvalidArgument("the brief is %d bytes, more than %d; put long material in files the worker can read", len(brief), maxBriefBytes)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return "", errdefs.Unavailable("sandboxd is shutting down; no worker can start")
	}
	if m.perRun[parent.ID] >= m.cfg.MaxPerRun {
		m.mu.Unlock()
		return "", errdefs.ResourceExhausted("this run already has %d workers, the limit; reuse one with vibe_send instead of spawning more", m.cfg.MaxPerRun)
	}
	m.perRun[parent.ID]++
	id := fmt.Sprintf("w%d", m.perRun[parent.ID])
	m.mu.Unlock()

	child, err := m.runs.Create(ctx, tools.Run{
		Tenant: parent.Tenant, Conversation: parent.Conversation, Surface: tools.SurfaceDefault,
		Workdir: parent.Workdir, Space: parent.Space, Approval: parent.Approval, Parent: parent.ID,
	})
	if err != nil {
		m.mu.Lock()
		m.perRun[parent.ID]--
		m.mu.Unlock()
		return "", err
	}
	w := &worker{
		id: id, label: label, tier: tier, tenant: parent.Tenant, parent: parent.ID, child: child,
		env: env, url: m.cfg.URL(ctx), brief: brief,
	}
	m.mu.Lock()
	m.workers[key(parent.ID, id)] = w
	err = m.startLocked(w)
	m.mu.Unlock()
	return id, err
}

// startLocked begins a new attempt of w. m.mu is held.
func (m *Manager) startLocked(w *worker) error {
	if m.closed {
		return errdefs.Unavailable("sandboxd is shutting down; no worker can start")
	}
	tok, err := m.tokens.Issue(w.tenant, w.child.ID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.attempt++
	w.state, w.result, w.killed = StateRunning, "", false
	w.started, w.ended = m.now(), time.Time{}
	w.cancel = cancel
	w.settled = make(chan struct{})
	spec := attemptSpec{
		argv:  append([]string(nil), m.cfg.Commands[w.tier]...),
		stdin: w.brief,
		env: map[string]string{
			"SANDBOXD_URL": w.url, "SANDBOXD_RUN": w.child.ID, "SANDBOXD_TOKEN": tok,
			"SANDBOXD_WORKER": w.id, "SANDBOXD_TIER": w.tier,
		},
		labels: map[string]string{"sandboxd.worker": w.id, "sandboxd.run": w.parent, "sandboxd.child-run": w.child.ID},
	}
	spec.attempt = w.attempt
	spec.live = w.live.write
	attempt, settled := w.attempt, w.settled
	m.attempts.Add(1)
	go func() {
		defer m.attempts.Done()
		defer cancel()
		r := m.runAttempt(ctx, w, spec)
		m.mu.Lock()
		defer m.mu.Unlock()
		if w.attempt == attempt {
			m.tokens.Revoke(w.child.ID)
			w.state, w.result = outcome(r, w.killed)
			w.ended = m.now()
		}
		close(settled)
	}()
	return nil
}

// runAttempt picks where the worker runs: the conversation's sandbox when
// it has one (it never creates one), else the host.
func (m *Manager) runAttempt(ctx context.Context, w *worker, spec attemptSpec) attemptResult {
	if w.env.HasSandbox && w.env.Sandbox != nil {
		// The worker's run has its parent's workdir, so the parent's
		// handle has the worker's directory too.
		conn, res, err := tools.Open(ctx, w.env)
		if res != nil {
			err = res.Cause()
			if err == nil {
				err = errors.New(res.Text())
			}
		}
		if err != nil {
			return attemptResult{err: fmt.Errorf("the conversation's sandbox cannot be reached: %w", err)}
		}
		spec.dir = conn.Workdir
		if m.cfg.Handler != nil && conn.Agent != nil {
			if h := m.cfg.Handler(); h != nil {
				rl, err := startRelay(ctx, conn.Agent, h, fmt.Sprintf("%s-%d", w.child.ID, spec.attempt), spec.labels)
				if err != nil {
					return attemptResult{err: err}
				}
				defer rl.close()
				spec.env["SANDBOXD_URL"] = rl.URL()
			}
		}
		return m.inSandbox(conn)(ctx, spec)
	}
	spec.dir = m.cfg.HostDir
	return m.host(ctx, spec)
}

// outcome turns how an attempt ended into the worker's state and result.
func outcome(r attemptResult, killed bool) (string, string) {
	switch {
	case killed || r.canceled:
		return StateKilled, strings.TrimSpace(r.stdout)
	case r.err != nil:
		return StateFailed, "the worker could not run: " + r.err.Error()
	case r.exitCode == 0 && r.signal == "":
		return StateDone, strings.TrimSpace(r.stdout)
	}
	how := fmt.Sprintf("exit status %d", r.exitCode)
	if r.signal != "" {
		how = "killed by signal " + r.signal
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the worker failed (%s)", how)
	if s := strings.TrimSpace(r.stderr); s != "" {
		b.WriteString("\nstderr:\n" + s)
	}
	if s := strings.TrimSpace(r.stdout); s != "" {
		b.WriteString("\nstdout:\n" + s)
	}
	return StateFailed, b.String()
}

func (m *Manager) get(parent, id string) (*worker, error) {
	w := m.workers[key(parent, id)]
	if w == nil {
		return nil, errdefs.NotFound("this run has no worker %q; vibe_list shows its workers", id)
	}
	return w, nil
}

// stopLocked ends w's running attempt (its goroutine kills the process).
func stopLocked(w *worker) {
	if w.state == StateRunning && w.cancel != nil {
		w.killed = true
		w.cancel()
	}
}

// Send appends message to the brief and re-runs the worker, stopping an
// attempt that is still running.
func (m *Manager) Send(parent, id, message string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, err := m.get(parent, id)
	if err != nil {
		return err
	}
	if len(w.brief)+len(message) > maxBriefBytes {
		return errdefs.InvalidArgument("the brief would grow past %d bytes; spawn a fresh worker with a shorter brief", maxBriefBytes)
	}
	stopLocked(w)
	w.brief = strings.TrimRight(w.brief, "\n") + "\n\n" + message
	return m.startLocked(w)
}

// Kill stops the worker; it reports whether it was running.
func (m *Manager) Kill(parent, id string) (bool, error) {
	m.mu.Lock()
	w, err := m.get(parent, id)
	if err != nil {
		m.mu.Unlock()
		return false, err
	}
	running := w.state == StateRunning
	stopLocked(w)
	settled := w.settled
	m.mu.Unlock()
	if running {
		select {
		case <-settled:
		case <-time.After(2 * killGrace):
		}
	}
	return running, nil
}

// Status is one worker as the tools report it.
type Status struct {
	ID, Label, Tier, State, Result, ChildRun string
	Elapsed                                  time.Duration
}

func (m *Manager) statusLocked(w *worker) Status {
	end := w.ended
	if end.IsZero() {
		end = m.now()
	}
	return Status{ID: w.id, Label: w.label, Tier: w.tier, State: w.state, Result: w.result, ChildRun: w.child.ID,
		Elapsed: end.Sub(w.started).Round(100 * time.Millisecond)}
}

// Wait blocks until the worker settles or timeout passes (or ctx ends),
// and returns its status then.
func (m *Manager) Wait(ctx context.Context, parent, id string, timeout time.Duration) (Status, error) {
	m.mu.Lock()
	w, err := m.get(parent, id)
	if err != nil {
		m.mu.Unlock()
		return Status{}, err
	}
	settled := w.settled
	m.mu.Unlock()
	defer w.live.watch(tools.OutputSinkFrom(ctx))()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-settled:
	case <-t.C:
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusLocked(w), nil
}

// List returns the run's workers in spawn order.
func (m *Manager) List(parent string) []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Status
	for _, w := range m.workers {
		if w.parent == parent {
			out = append(out, m.statusLocked(w))
		}
	}
	slices.SortFunc(out, func(a, b Status) int {
		var x, y int
		fmt.Sscanf(a.ID, "w%d", &x)
		fmt.Sscanf(b.ID, "w%d", &y)
		return x - y
	})
	return out
}

// EndRun is called when a run ends: its workers are killed and forgotten,
// and if it was a worker's child run, its token is revoked.
func (m *Manager) EndRun(runID string) {
	m.tokens.Revoke(runID)
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if w.parent == runID {
			stopLocked(w)
			m.tokens.Revoke(w.child.ID)
			delete(m.workers, k)
		}
	}
	delete(m.perRun, runID)
}

// Close kills every worker and waits for their attempts to end (bounded).
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for _, w := range m.workers {
		stopLocked(w)
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.attempts.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * killGrace):
	}
}

// Counts returns how many workers the manager knows in each state
// (StateRunning, StateDone, StateFailed, StateKilled), for the metrics.
func (m *Manager) Counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, w := range m.workers {
		out[w.state]++
	}
	return out
}
