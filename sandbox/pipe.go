package sandbox

import (
	"context"
	"errors"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Agent returns the one agent client of the conversation's sandbox, opening
// the pipe when there is none or the last one dropped. Every call counts as
// use for idle reaping. It never creates or starts a sandbox.
func (m *Manager) Agent(ctx context.Context, tenant, conversation string) (*agent.Client, Info, error) {
	if err := ValidateConversation(conversation); err != nil {
		return nil, Info{}, err
	}
	// A pipe that dies right after it opened is retried a few times, never forever.
	for attempt := 0; ; attempt++ {
		if attempt == 4 {
			return nil, Info{}, errdefs.Unavailable("the agent pipe of conversation %s keeps dropping right after it opens; retry later, or delete and re-create the sandbox", conversation)
		}
		if err := m.checkOpen(); err != nil {
			return nil, Info{}, err
		}
		e, err := m.find(ctx, tenant, conversation)
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
			info := e.info
			m.mu.Unlock()
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
			return nil, Info{}, d.err
		}
	}
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
	default:
		e.info = info
		e.client = c
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
	if err != nil {
		m.log.Warn("agent pipe not opened", "id", id, "conversation", conv, "err", err)
	} else {
		m.log.Debug("agent pipe opened", "id", id, "conversation", conv)
	}
}

// open checks that the sandbox still runs, then attaches to its agent.
func (m *Manager) open(ctx context.Context, id, conv string) (*agent.Client, Info, error) {
	info, err := m.backend.Inspect(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		m.forget(id, "it was removed outside sandboxd")
		return nil, Info{}, errdefs.NotFound("the sandbox of conversation %s no longer exists (it was removed outside sandboxd); create a new one", conv)
	}
	if err != nil {
		return nil, Info{}, m.backendErr("inspect sandbox "+id, err)
	}
	if info.State != StateRunning {
		return nil, Info{}, errdefs.FailedPrecondition("the sandbox of conversation %s is no longer running (it was stopped outside sandboxd); delete it and create a new one", conv)
	}
	rwc, err := m.backend.AttachAgent(ctx, id)
	if err != nil {
		return nil, Info{}, m.backendErr("attach to the agent of sandbox "+id, err)
	}
	c, err := agent.NewClient(ctx, rwc)
	if err != nil {
		_ = rwc.Close()
		return nil, Info{}, errdefs.Unavailable("the agent in the sandbox of conversation %s did not answer: %v; retry, and delete and re-create the sandbox if it persists", conv, err)
	}
	return c, info, nil
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
