package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	// stateReadTimeout bounds the reads of a sandbox's state on the call path.
	stateReadTimeout = 10 * time.Second
	// dialSettle is how long a failed dial waits for the engine to report
	// a sandbox that it still calls running as stopped.
	dialSettle = 2 * time.Second
)

// Agent returns the one agent client of the conversation's sandbox, opening
// the pipe when there is none or the last one dropped. Every call counts as
// use for idle reaping. It never creates or starts a sandbox.
func (m *Manager) Agent(ctx context.Context, tenant, conversation string) (*agent.Client, Info, error) {
	if err := ValidateConversation(conversation); err != nil {
		return nil, Info{}, err
	}
	return m.agent(ctx, conversation, func() (*entry, error) { return m.find(ctx, tenant, conversation) })
}

// AgentOf is Agent for a sandbox the caller has already looked up (the API
// does once per call): it is taken by its id, with no second search of
// the conversation's sandboxes. A sandbox removed or replaced since is
// NotFound, saying so.
func (m *Manager) AgentOf(ctx context.Context, info Info) (*agent.Client, Info, error) {
	return m.agent(ctx, info.Conversation, func() (*entry, error) {
		m.mu.Lock()
		e := m.byID[info.ID]
		gone := e == nil || e.removing || e.info.Tenant != info.Tenant
		m.mu.Unlock()
		if gone {
			return nil, errdefs.NotFound("the sandbox %s of conversation %q is gone (removed or replaced as this call started); call again to use the conversation's current sandbox", info.ID, info.Conversation)
		}
		return e, nil
	})
}

// agent opens (or reuses) the pipe of the entry find returns.
func (m *Manager) agent(ctx context.Context, conversation string, find func() (*entry, error)) (*agent.Client, Info, error) {
	// A pipe that dies right after it opened is retried a few times, never forever.
	for attempt := 0; ; attempt++ {
		if attempt == 4 {
			return nil, Info{}, errdefs.Unavailable("the agent pipe of conversation %s keeps dropping right after it opens; retry later, or delete and re-create the sandbox", conversation)
		}
		if err := m.checkOpen(); err != nil {
			return nil, Info{}, err
		}
		e, err := find()
		if err != nil {
			return nil, Info{}, err
		}
		m.mu.Lock()
		if m.byID[e.info.ID] != e || e.removing {
			m.mu.Unlock()
			continue // dropped or being deleted meanwhile: look again
		}
		e.lastUsed = m.opts.now()
		if c := e.client; c != nil && !isDone(c) {
			info, started := e.info, e.clientStarted
			// A sandbox paused through the manager is read again at once:
			// its pipe is open but its agent frozen.
			fresh := time.Since(e.checked) < m.opts.stateCheck && info.State == StateRunning
			m.mu.Unlock()
			if !fresh {
				if info, err = m.recheck(ctx, e, started, conversation); err != nil {
					if errors.Is(err, errRestartedUnder) {
						m.dropPipe(e, c, "the sandbox restarted under it")
						continue
					}
					if m.wakeFor(ctx, err) {
						continue
					}
					return nil, Info{}, err
				}
			}
			return c, info, nil
		}
		d := e.dial
		if d == nil {
			d = &dialing{done: make(chan struct{})}
			e.dial = d
			m.wg.Add(1)
			go m.dialer(e, d)
		}
		m.mu.Unlock()

		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, Info{}, errdefs.DeadlineExceeded("connecting to the agent of conversation %s: %v; retry", conversation, ctx.Err())
		}
		if d.err != nil {
			if m.wakeFor(ctx, d.err) {
				continue
			}
			return nil, Info{}, d.err
		}
	}
}

// wakeFor resumes the sandbox err says is asleep (paused or hibernated)
// and reports whether the caller should try again; any other error, or a
// resume that fails, is left to the caller (a failed resume is logged and
// its error message replaces err through the next attempt's state read).
func (m *Manager) wakeFor(ctx context.Context, err error) bool {
	var asleep *errAsleep
	if !errors.As(err, &asleep) {
		return false
	}
	if werr := m.wake(ctx, asleep.info); werr != nil {
		m.log.Warn("cannot resume a sandbox for a call", "id", asleep.info.ID, "conversation", asleep.info.Conversation, "err", werr)
		asleep.wakeErr = werr
		return false
	}
	return true
}

// dialer opens e's pipe and publishes the outcome through d. It runs under
// the Manager's context, not a caller's, because the pipe outlives the call
// that asked for it.
func (m *Manager) dialer(e *entry, d *dialing) {
	defer m.wg.Done()
	m.mu.Lock()
	id, conv := e.info.ID, e.info.Conversation
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(m.ctx, m.opts.dialTimeout)
	defer cancel()
	c, info, err := m.open(ctx, id, conv)

	m.mu.Lock()
	e.dial = nil
	switch {
	case err != nil:
	case m.closed || m.byID[id] != e || e.removing:
		err = errdefs.NotFound("the sandbox of conversation %s was deleted while connecting to it; create a new one", conv)
	case d.detached:
		// Closed below; the waiters look again and open a new pipe.
	default:
		e.setInfo(info)
		e.client, e.clientStarted = c, info.Started
		c = nil
		if e.opened {
			m.reconnects++
			m.opts.observer.AgentReconnected(m.name)
		}
		e.opened = true
		m.opts.observer.PipeOpened(m.name)
		m.wg.Add(1)
		go m.watch(e, e.client)
	}
	d.err = err
	close(d.done)
	m.mu.Unlock()

	if c != nil {
		_ = c.Close()
	}
	switch {
	case err != nil:
		m.log.Warn("agent pipe not opened", "id", id, "conversation", conv, "err", err)
	case c != nil:
		m.log.Debug("agent pipe opened and closed again: it was detached meanwhile", "id", id, "conversation", conv)
	default:
		m.log.Debug("agent pipe opened", "id", id, "conversation", conv)
	}
}

// Detach closes id's agent pipe, and discards one being opened, without
// removing the sandbox from the map: the next Agent call opens a new pipe
// (and runs the attach hook on it). Calls on the closed client fail as on
// a dropped pipe. A replica detaches the sandboxes whose lease it lost.
func (m *Manager) Detach(id, why string) {
	m.mu.Lock()
	e := m.byID[id]
	if e == nil {
		m.mu.Unlock()
		return
	}
	c, d, conv := e.client, e.dial, e.info.Conversation
	e.client = nil
	if d != nil {
		d.detached = true
	}
	e.opened = false // the next pipe is not a reconnect after a drop
	m.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	if c != nil || d != nil {
		m.log.Info("agent pipe detached", "id", id, "conversation", conv, "reason", why)
	}
}

// open checks that the sandbox still runs, then attaches to its agent. When
// the attach or the hello fails, the engine is asked again: a sandbox that
// stopped, paused or vanished meanwhile is reported as such, not as a
// dropped session.
func (m *Manager) open(ctx context.Context, id, conv string) (*agent.Client, Info, error) {
	info, err := m.inspectOwn(ctx, id, conv)
	if err != nil {
		return nil, Info{}, err
	}
	if info.State != StateRunning {
		if m.asleep(info) {
			return nil, Info{}, &errAsleep{info: info}
		}
		return nil, Info{}, m.stateErr(info, conv)
	}
	rwc, err := m.backend.AttachAgent(ctx, id)
	if err != nil {
		return nil, Info{}, m.dialFailed(ctx, id, conv, m.backendErr("attach to the agent of sandbox "+id, err))
	}
	c, err := agent.NewClient(ctx, rwc, m.stallOption(id, info.Started), m.endOption(id, info.Started))
	if err != nil {
		_ = rwc.Close()
		return nil, Info{}, m.dialFailed(ctx, id, conv,
			errdefs.Unavailable("the agent in the sandbox of conversation %s did not answer: %v; retry, and delete and re-create the sandbox if it persists", conv, err))
	}
	if hook := m.opts.attachHook; hook != nil {
		if err := hook(ctx, info, c); err != nil {
			_ = c.Close()
			return nil, Info{}, err
		}
	}
	m.mu.Lock()
	if e := m.byID[id]; e != nil {
		e.checked = time.Now()
	}
	m.mu.Unlock()
	return c, info, nil
}

// inspectOwn reads id's state from the engine; a sandbox that is gone (or
// not the deployment's) is dropped from the map and NotFound.
func (m *Manager) inspectOwn(ctx context.Context, id, conv string) (Info, error) {
	info, err := m.backend.Inspect(ctx, id)
	if err == nil && !m.dep.Owns(info.Labels) {
		err = errdefs.NotFound("sandbox %s belongs to another deployment", id)
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		m.forget(id, "it was removed outside sandboxd")
		return Info{}, errdefs.NotFound("the sandbox of conversation %s no longer exists (it was removed outside sandboxd); create a new one", conv)
	}
	if err != nil {
		return Info{}, m.backendErr("inspect sandbox "+id, err)
	}
	m.mu.Lock()
	if e := m.byID[id]; e != nil && !e.removing {
		e.setInfo(info)
	}
	m.mu.Unlock()
	return info, nil
}

// dialFailed explains a failed attach or hello by the engine's state when
// that says more than dialErr: a sandbox that no longer runs is never told
// to "reconnect and retry". An engine may report a container's death a
// moment after the exec into it failed (a kubelet notices within about a
// second), so a sandbox still said to run is read again for a short settle
// time. The dial's context may have ended; the reads have their own.
func (m *Manager) dialFailed(ctx context.Context, id, conv string, dialErr error) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateReadTimeout)
	defer cancel()
	settle := time.Now().Add(dialSettle)
	for {
		info, err := m.inspectOwn(sctx, id, conv)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			return err
		case err != nil:
			return dialErr
		case info.State != StateRunning:
			return m.stateErr(info, conv)
		case time.Now().After(settle):
			return dialErr
		}
		select {
		case <-sctx.Done():
			return dialErr
		case <-m.ctx.Done():
			return dialErr
		case <-time.After(dialSettle / 10):
		}
	}
}

// recheck asks the engine whether e's sandbox still runs before its open
// pipe, opened at the sandbox's start started, is handed out again. An
// engine that cannot respond now does not fail a pipe that works; a
// sandbox that restarted since the pipe opened is errRestartedUnder.
func (m *Manager) recheck(ctx context.Context, e *entry, started time.Time, conv string) (Info, error) {
	m.mu.Lock()
	id, cached := e.info.ID, e.info
	m.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, stateReadTimeout)
	defer cancel()
	info, err := m.inspectOwn(sctx, id, conv)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return Info{}, err
	case err != nil:
		m.log.Debug("cannot read the sandbox's state; using its open pipe", "id", id, "err", err)
		return cached, nil
	case restartedUnder(started, info):
		return Info{}, errRestartedUnder
	case info.State != StateRunning && m.asleep(info):
		return Info{}, &errAsleep{info: info}
	case info.State != StateRunning:
		return Info{}, m.stateErr(info, conv)
	}
	m.mu.Lock()
	e.checked = time.Now()
	m.mu.Unlock()
	return info, nil
}

// stateErr says why a sandbox that exists cannot take tool calls, and what
// to do: a paused one keeps its workspace and only needs unpausing.
func (m *Manager) stateErr(info Info, conv string) error {
	switch info.State {
	case StatePaused:
		hint := "unpause it in its engine"
		if h, ok := m.backend.(ResumeHinter); ok {
			hint = "unpause it, e.g. `" + h.ResumeHint(info) + "`"
		}
		return errdefs.FailedPrecondition("the sandbox of conversation %s is paused (frozen in its engine outside sandboxd; its workspace and processes are kept); %s, and the next call works", conv, hint)
	case StateGone:
		return errdefs.NotFound("the sandbox of conversation %s is being removed; create a new one", conv)
	case StateHibernated:
		return errdefs.FailedPrecondition("the sandbox of conversation %s is hibernated (its files are kept, its processes were stopped); resume it with POST /v1/sandboxes/%s/resume", conv, info.ID)
	}
	if info.Restarting {
		return errdefs.Unavailable("the sandbox of conversation %s is restarting: its processes died and its engine is starting it again (its files are kept)%s; retry in a few seconds", conv, restartCause(info))
	}
	return errdefs.FailedPrecondition("the sandbox of conversation %s is no longer running (it was stopped outside sandboxd); delete it and create a new one", conv)
}

// stallOption makes a call on id's pipe, opened at the sandbox's start
// started, that gets no response (the agent does not respond to a ping
// either) ask the engine why: a sandbox paused, stopped or removed behind
// sandboxd's back ends the call at once with stateErr's error message
// instead of hanging until the session's keepalive gives up, and so does
// one that restarted under the pipe (its engine may keep such a pipe open
// with nothing behind it: runsc does). The engine's response is also kept:
// the next Agent call reads the state again rather than hand out the pipe
// unchecked. An engine that cannot respond, or says the sandbox runs as
// when the pipe opened, lets the call wait on.
func (m *Manager) stallOption(id string, started time.Time) agent.ClientOption {
	return agent.WithStallCheck(0, func(ctx context.Context) error {
		why, _ := m.whyNoAnswer(ctx, id, started, "a call on the agent pipe got no answer")
		return why
	})
}

// endOption makes a call whose session on id's pipe (opened at the
// sandbox's start started) ended under it ask the engine why, as
// stallOption does, and end with that: an engine may end the pipe of a
// sandbox that died a moment before it reports the death, so a sandbox
// still said to run as before is read again for up to dialSettle. The
// next Agent call then reads the state again.
func (m *Manager) endOption(id string, started time.Time) agent.ClientOption {
	return agent.WithEndCheck(func(ctx context.Context) error {
		settle := time.Now().Add(dialSettle)
		for {
			why, known := m.whyNoAnswer(ctx, id, started, "the agent pipe ended under a call")
			if why != nil || !known || time.Now().After(settle) {
				return why
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(dialSettle / 10):
			}
		}
	})
}

// whyNoAnswer asks the engine about sandbox id for a call on its pipe,
// opened at the sandbox's start started, that got no answer (what says
// how). why is the error message the call ends with: the engine's not
// found, or that the sandbox restarted or no longer runs — then the next
// Agent call reads the state again. It is nil while the sandbox runs as
// when the pipe opened (known) or when the engine cannot say (!known).
func (m *Manager) whyNoAnswer(ctx context.Context, id string, started time.Time, what string) (why error, known bool) {
	m.mu.Lock()
	conv := ""
	if e := m.byID[id]; e != nil {
		conv = e.info.Conversation
	}
	m.mu.Unlock()
	info, err := m.inspectOwn(ctx, id, conv)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return err, true
	case err != nil:
		return nil, false
	}
	restarted := restartedUnder(started, info)
	if info.State == StateRunning && !restarted {
		return nil, true
	}
	m.mu.Lock()
	if e := m.byID[id]; e != nil {
		e.checked = time.Time{}
	}
	m.mu.Unlock()
	m.log.Info(what+": the sandbox no longer runs as it did", "id", id, "conversation", conv, "state", info.State, "runtime", RuntimeOf(info), "restarted", restarted)
	if restarted {
		return restartedErr(info, conv), true
	}
	return m.stateErr(info, conv), true
}

// restartedErr says that info's sandbox restarted under a call.
func restartedErr(info Info, conv string) error {
	return errdefs.Unavailable("the sandbox of conversation %s restarted during this call: its processes died, this call's command with them, and its engine started it again (its files are kept)%s; check what the call had done, then retry", conv, restartCause(info))
}

// errRestartedUnder is recheck's word that the sandbox restarted after
// its open pipe was opened: the pipe leads nowhere and is replaced.
var errRestartedUnder = errors.New("the sandbox restarted under its agent pipe")

// restartedUnder reports whether info, just read from the engine, shows
// that the sandbox stopped or started again after a pipe was opened at
// its start started (zero: unknown, never a restart).
func restartedUnder(started time.Time, info Info) bool {
	if started.IsZero() {
		return false
	}
	return info.Restarting || info.Started.After(started)
}

// restartCause names the likely cause of a restart the user can act on:
// under gVisor the sandbox's limits count gVisor's own kernel, so reaching
// one stops the whole sandbox.
func restartCause(info Info) string {
	if RuntimeOf(info) != RuntimeGVisor {
		return ""
	}
	return "; under gVisor the sandbox's pids and memory limits count gVisor's own kernel, so reaching one stops the whole sandbox: give it more, or run fewer processes at once"
}

// dropPipe closes c, e's pipe, so that the next Agent call opens a new
// one (counted as a reconnect); a pipe replaced meanwhile is left alone.
func (m *Manager) dropPipe(e *entry, c *agent.Client, why string) {
	m.mu.Lock()
	ours := e.client == c
	if ours {
		e.client = nil
	}
	id, conv := e.info.ID, e.info.Conversation
	m.mu.Unlock()
	if !ours {
		return
	}
	_ = c.Close()
	m.log.Info("agent pipe dropped", "id", id, "conversation", conv, "reason", why)
}

// watch waits for c to end and clears it from e, so that the next Agent
// call opens a new pipe and counts a reconnect.
func (m *Manager) watch(e *entry, c *agent.Client) {
	defer m.wg.Done()
	select {
	case <-c.Done():
	case <-m.ctx.Done():
		_ = c.Close()
		<-c.Done()
	}
	m.opts.observer.PipeClosed(m.name)
	m.mu.Lock()
	if e.client == c {
		e.client = nil
	}
	m.mu.Unlock()
}

func isDone(c *agent.Client) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}
