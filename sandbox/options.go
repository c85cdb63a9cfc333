package sandbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandboxd/sandboxd/agent"
)

// Option configures a Manager.
type Option func(*options)

type options struct {
	idleTTL      time.Duration
	log          *slog.Logger
	observer     Observer
	now          func() time.Time
	refreshEvery time.Duration
	missRefresh  time.Duration
	dialTimeout  time.Duration
	stateCheck   time.Duration
	attachHook   func(ctx context.Context, info Info, c *agent.Client) error
	reapGate     func(ctx context.Context, info Info) (release func(), ok bool)
	pools        []PoolSpec
	lifecycle    func(Info) Lifecycle
	lifecycleObs LifecycleObserver
}

func defaultOptions() options {
	return options{
		log:          slog.New(slog.DiscardHandler),
		observer:     nopObserver{},
		now:          time.Now,
		refreshEvery: 30 * time.Second,
		missRefresh:  time.Second,
		dialTimeout:  30 * time.Second,
		stateCheck:   time.Second,
	}
}

// WithIdleTTL removes sandboxes that no agent call used for ttl; 0 (the
// default) never reaps.
func WithIdleTTL(ttl time.Duration) Option {
	return func(o *options) {
		if ttl > 0 {
			o.idleTTL = ttl
		}
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithObserver reports pipe events, for metrics.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.observer = obs
		}
	}
}

// WithClock replaces time.Now for idle accounting (tests).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithRefreshInterval sets how often the map is re-read from the backend to
// notice sandboxes created or removed outside this Manager (default 30s).
func WithRefreshInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.refreshEvery = d
		}
	}
}

// WithDialTimeout bounds opening one agent pipe (default 30s).
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.dialTimeout = d
		}
	}
}

// WithStateCheck sets how long the engine's word that a sandbox runs is
// trusted before an open pipe is handed out again without asking (default
// 1s): the bound on engine reads per busy sandbox, and how soon a paused or
// stopped sandbox is reported as such instead of hanging a call.
func WithStateCheck(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.stateCheck = d
		}
	}
}

// WithAttachHook runs hook on every newly opened agent pipe before it is
// handed out, on the dialer's goroutine and under its deadline (replicas
// claim the sandbox there). An error closes the pipe and fails the Agent
// calls waiting for it with that error, its errdefs class kept.
func WithAttachHook(hook func(ctx context.Context, info Info, c *agent.Client) error) Option {
	return func(o *options) { o.attachHook = hook }
}

// WithReapGate asks gate before the idle reaper removes a sandbox, under
// the conversation's lock: !ok leaves the sandbox for a later round (say,
// another replica owns it), and release, when not nil, is called once the
// removal was tried.
func WithReapGate(gate func(ctx context.Context, info Info) (release func(), ok bool)) Option {
	return func(o *options) { o.reapGate = gate }
}

// WithPools keeps warm pools: per spec, Size sandboxes of Image made,
// started and attached ahead of time; Create for that image with the
// default resources, network, env and workspace claims one instead of
// making one. The backend must be a Claimer (Start fails otherwise). A
// later spec for the same image replaces an earlier one.
func WithPools(specs ...PoolSpec) Option {
	return func(o *options) {
		for _, s := range specs {
			if s.Image != "" && s.Size > 0 {
				o.pools = append(o.pools, s)
			}
		}
	}
}

// WithLifecycle gives the lifecycle of a sandbox created without one of
// its own (the deployment's or its tenant's default).
func WithLifecycle(def func(Info) Lifecycle) Option {
	return func(o *options) { o.lifecycle = def }
}

// WithLifecycleObserver tells obs of every sandbox's state changes.
func WithLifecycleObserver(obs LifecycleObserver) Option {
	return func(o *options) { o.lifecycleObs = obs }
}
