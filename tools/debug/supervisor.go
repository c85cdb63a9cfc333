package debug

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// Defaults (DESIGN.md §4 debug).
const (
	DefaultSessionTTL = 30 * time.Minute
	DefaultStopWait   = 10 * time.Second
	DefaultLaunchWait = 2 * time.Minute
)

type timeouts struct {
	connect time.Duration // adapter socket appearing
	request time.Duration // one ordinary request
	launch  time.Duration // launch/attach incl. a build (delve)
	stop    time.Duration // continue/step waiting for the next stop
}

// Option configures a Supervisor.
type Option func(*Supervisor)

// WithSessionTTL sets the hard lifetime of a session (default 30 minutes).
func WithSessionTTL(d time.Duration) Option { return func(s *Supervisor) { s.ttl = d } }

// WithStopWait sets how long continue/step/launch wait for a stop before
// reporting "running" (default 10 s).
func WithStopWait(d time.Duration) Option { return func(s *Supervisor) { s.to.stop = d } }

// WithLaunchTimeout bounds launch/attach, a delve build included (default 2 minutes).
func WithLaunchTimeout(d time.Duration) Option { return func(s *Supervisor) { s.to.launch = d } }

// WithLogger sets where session ends and failures are logged.
func WithLogger(l *slog.Logger) Option { return func(s *Supervisor) { s.log = l } }

// Supervisor keeps one debug session per conversation (keyed by sandbox and
// conversation), the breakpoints set before launch, and each session's hard
// TTL. The sessions' processes belong to the sandbox agent.
//
// Goroutines: one TTL timer per live session (time.AfterFunc), which
// terminates it. Close stops the timers and leaves the sessions running in
// their sandboxes, so a restart can find them again.
type Supervisor struct {
	ttl time.Duration
	to  timeouts
	log *slog.Logger

	// mu guards convs.
	mu    sync.Mutex
	convs map[string]*convState
}

// convState is one conversation's debug state.
type convState struct {
	sess    *session
	timer   *time.Timer
	bps     map[string][]int // absolute file -> lines, kept across sessions
	expired string           // why the last session ended on its TTL
}

// NewSupervisor returns a supervisor with no sessions.
func NewSupervisor(opts ...Option) *Supervisor {
	s := &Supervisor{
		ttl:   DefaultSessionTTL,
		to:    timeouts{connect: 20 * time.Second, request: 30 * time.Second, launch: DefaultLaunchWait, stop: DefaultStopWait},
		convs: map[string]*convState{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Close stops the TTL timers; sessions keep running inside their sandboxes.
func (sv *Supervisor) Close() {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for _, c := range sv.convs {
		if c.timer != nil {
			c.timer.Stop()
		}
	}
}

func convKey(sandboxID, tenant, conversation string) string {
	return sandboxID + "\x00" + tenant + "\x00" + conversation
}

// convLabel is a short stable name for a conversation inside the sandbox.
func convLabel(tenant, conversation string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + conversation))
	return hex.EncodeToString(h[:8])
}

func (sv *Supervisor) conv(key string) *convState {
	c := sv.convs[key]
	if c == nil {
		c = &convState{bps: map[string][]int{}}
		sv.convs[key] = c
	}
	return c
}

// current returns the conversation's session (nil when none) and, when the
// last one expired, why.
func (sv *Supervisor) current(key string) (*session, string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	c := sv.conv(key)
	return c.sess, c.expired
}

// adopt makes s the conversation's session and arms its TTL.
func (sv *Supervisor) adopt(key string, s *session) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	c := sv.conv(key)
	c.sess, c.expired = s, ""
	ttl := sv.ttl - time.Since(s.started)
	if ttl < 0 {
		ttl = 0
	}
	c.timer = time.AfterFunc(ttl, func() { sv.expire(key, s) })
}

// expire ends a session that reached the hard TTL. Calls made while it is
// being terminated already read that it expired.
func (sv *Supervisor) expire(key string, s *session) {
	msg := fmt.Sprintf("The debug session (%s, started %s UTC) expired: sessions last at most %s, so it was terminated. Launch again to start a new one.",
		s.adapter, s.started.UTC().Format(time.TimeOnly), sv.ttl)
	sv.mu.Lock()
	c := sv.convs[key]
	own := c != nil && c.sess == s
	sv.mu.Unlock()
	if !own {
		return
	}
	s.markExpired(msg)
	sv.log.Info("debug session expired", "adapter", s.adapter, "session", s.id)
	s.terminate()
	sv.mu.Lock()
	if c.sess == s {
		c.sess, c.timer, c.expired = nil, nil, msg
	}
	sv.mu.Unlock()
}

// drop forgets the conversation's session (after terminate).
func (sv *Supervisor) drop(key string, s *session) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	c := sv.conv(key)
	if c.sess == s {
		if c.timer != nil {
			c.timer.Stop()
		}
		c.sess, c.timer = nil, nil
	}
	c.expired = ""
}

// breakpoints returns a copy of the conversation's breakpoints.
func (sv *Supervisor) breakpoints(key string) map[string][]int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	out := map[string][]int{}
	for f, l := range sv.conv(key).bps {
		out[f] = append([]int(nil), l...)
	}
	return out
}

func (sv *Supervisor) setBreakpoints(key, file string, lines []int) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	c := sv.conv(key)
	if len(lines) == 0 {
		delete(c.bps, file)
		return
	}
	c.bps[file] = append([]int(nil), lines...)
}

// orphans lists adapter processes of this conversation that the agent
// still runs but this supervisor does not know (a sandboxd restart).
func orphans(ctx context.Context, ag *agent.Client, label string) ([]proto.ProcessInfo, error) {
	ps, err := ag.List(ctx, &proto.ListRequest{Labels: map[string]string{labelRole: "adapter", labelConv: label}})
	if err != nil {
		return nil, err
	}
	var out []proto.ProcessInfo
	for _, p := range ps {
		if p.Running {
			out = append(out, p)
		}
	}
	return out, nil
}

// Sessions counts the live debug sessions, for the metrics.
func (sv *Supervisor) Sessions() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	n := 0
	for _, c := range sv.convs {
		if c.sess != nil && !c.sess.state().ended {
			n++
		}
	}
	return n
}
