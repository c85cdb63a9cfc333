package sandbox

import (
	"log/slog"
	"time"
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
// stopped sandbox is told as such instead of hanging a call.
func WithStateCheck(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.stateCheck = d
		}
	}
}
