package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// resumeTimeout bounds a resume made for a call (the caller's own deadline
// may be shorter).
const resumeTimeout = 60 * time.Second

// Pause freezes the tenant's sandbox id: every process is kept in memory
// and gets no CPU. A paused sandbox is resumed by Resume, or by the next
// call that needs its agent. The pipe stays open across a short pause.
func (m *Manager) Pause(ctx context.Context, tenant, id string) (Info, error) {
	return m.transition(ctx, tenant, id, "pause", func(ctx context.Context, info Info) (Info, error) {
		f, ok := m.backend.(Freezer)
		if !ok {
			return Info{}, errdefs.FailedPrecondition("the %s backend cannot pause a sandbox; hibernate it, or leave it running", m.name)
		}
		switch info.State {
		case StatePaused:
			return info, nil
		case StateHibernated:
			return info, nil // asleep already, and deeper
		case StateRunning:
		default:
			return Info{}, errdefs.FailedPrecondition("sandbox %s is %s, so it cannot be paused", id, info.State)
		}
		if err := f.Pause(ctx, id); err != nil {
			return Info{}, m.backendErr("pause sandbox "+id, err)
		}
		return m.settle(ctx, id, info.Conversation, StatePaused)
	})
}

// Hibernate stops every process of the tenant's sandbox id and frees its
// memory, keeping its files. The agent records its processes as stopped by
// hibernation; the next call (or Resume) starts it again.
func (m *Manager) Hibernate(ctx context.Context, tenant, id string) (Info, error) {
	return m.transition(ctx, tenant, id, "hibernate", func(ctx context.Context, info Info) (Info, error) {
		h, ok := m.backend.(Hibernator)
		if !ok {
			return Info{}, errdefs.FailedPrecondition("the %s backend cannot hibernate a sandbox", m.name)
		}
		switch info.State {
		case StateHibernated:
			return info, nil
		case StateRunning, StatePaused:
		default:
			return Info{}, errdefs.FailedPrecondition("sandbox %s is %s, so there is nothing to hibernate; resume it first", id, info.State)
		}
		if m.canHibernate(info) {
			m.Detach(id, "hibernating") // else the backend refuses, in a sentence, and the pipe stays
		}
		if err := h.Hibernate(ctx, id); err != nil {
			return Info{}, m.backendErr("hibernate sandbox "+id, err)
		}
		return m.settle(ctx, id, info.Conversation, StateHibernated)
	})
}

// Resume brings the tenant's paused, hibernated or stopped sandbox id back
// to running and returns once its agent answers. A running sandbox is
// returned as it is.
func (m *Manager) Resume(ctx context.Context, tenant, id string) (Info, error) {
	info, err := m.transition(ctx, tenant, id, "resume", m.resumeLocked)
	if err != nil {
		return Info{}, err
	}
	if _, info, err = m.AgentOf(ctx, info); err != nil {
		return Info{}, err
	}
	return m.withSince(info), nil
}

// resumeLocked wakes info's sandbox; the caller holds its conversation's
// lock.
func (m *Manager) resumeLocked(ctx context.Context, info Info) (Info, error) {
	switch info.State {
	case StateRunning:
		return info, nil
	case StatePaused:
		f, ok := m.backend.(Freezer)
		if !ok {
			return Info{}, m.stateErr(info, info.Conversation)
		}
		if err := f.Unpause(ctx, info.ID); err != nil {
			return Info{}, m.backendErr("resume sandbox "+info.ID, err)
		}
	case StateHibernated, StateStopped:
		h, ok := m.backend.(Hibernator)
		if !ok {
			return Info{}, m.stateErr(info, info.Conversation)
		}
		m.Detach(info.ID, "waking")
		if err := h.Wake(ctx, info.ID); err != nil {
			return Info{}, m.backendErr("resume sandbox "+info.ID, err)
		}
	default:
		return Info{}, m.stateErr(info, info.Conversation)
	}
	got, err := m.settle(ctx, info.ID, info.Conversation, StateRunning)
	if err == nil {
		m.mu.Lock()
		if e := m.byID[info.ID]; e != nil {
			e.lastUsed = m.opts.now()
		}
		m.mu.Unlock()
		m.log.Info("sandbox resumed", "id", info.ID, "conversation", info.Conversation, "from", info.State)
		m.changed(got, ChangeResumed)
	}
	return got, err
}

// transition runs do on the tenant's sandbox id under its conversation's
// lock, with its state read from the engine: a verb during another
// transition of the same sandbox waits for it, and then sees its outcome.
func (m *Manager) transition(ctx context.Context, tenant, id, verb string, do func(context.Context, Info) (Info, error)) (Info, error) {
	if err := m.checkOpen(); err != nil {
		return Info{}, err
	}
	info, err := m.Get(ctx, tenant, id)
	if err != nil {
		return Info{}, err
	}
	unlock, err := m.convLocks.lock(ctx, convKey(tenant, info.Conversation))
	if err != nil {
		return Info{}, errdefs.DeadlineExceeded("waiting for another operation on sandbox %s: %v; retry", id, err)
	}
	defer unlock()
	if info, err = m.Get(ctx, tenant, id); err != nil {
		return Info{}, err
	}
	before := info.State
	got, err := do(ctx, info)
	if err != nil {
		return Info{}, err
	}
	if got.State != before {
		m.log.Info("sandbox "+verb, "id", id, "conversation", info.Conversation, "from", before, "to", got.State)
		if got.State != StateRunning { // resumeLocked told of a resume
			m.changed(got, changeOf(got.State))
		}
	}
	return got, nil
}

// settle reads id's state until the engine reports want (an engine may
// take a moment to say what it did), records since when, and returns it.
func (m *Manager) settle(ctx context.Context, id, conv, want string) (Info, error) {
	deadline := time.Now().Add(stateReadTimeout)
	for {
		info, err := m.inspectOwn(ctx, id, conv)
		if err != nil {
			return Info{}, err
		}
		if info.State == want {
			now := time.Now().UTC()
			m.mu.Lock()
			if info.StateSince.IsZero() {
				info.StateSince = now
			}
			if e := m.byID[id]; e != nil && !e.removing {
				e.setInfo(info)
				e.since, e.sinceState = info.StateSince, want
				if want == StateRunning {
					e.checked = time.Now()
				}
			}
			m.mu.Unlock()
			return info, nil
		}
		if time.Now().After(deadline) {
			return Info{}, errdefs.Unavailable("sandbox %s is %s, not %s, after the engine was asked; retry", id, info.State, want)
		}
		select {
		case <-ctx.Done():
			return Info{}, errdefs.DeadlineExceeded("waiting for sandbox %s to be %s: %v", id, want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// asleep reports whether info's state is one a call wakes from.
func (m *Manager) asleep(info Info) bool {
	switch info.State {
	case StatePaused:
		// Only a pause of sandboxd's own: one made in the engine by
		// someone else is theirs to undo (stateErr says how).
		_, ok := m.backend.(Freezer)
		return ok && info.Labels[LabelPausedAt] != ""
	case StateHibernated:
		_, ok := m.backend.(Hibernator)
		return ok
	}
	return false
}

// errAsleep carries a sandbox that a call found paused or hibernated, for
// agent to wake before it goes on.
type errAsleep struct {
	info    Info
	wakeErr error // set when the resume failed: the caller's error message
}

func (e *errAsleep) Error() string {
	if e.wakeErr != nil {
		return e.wakeErr.Error()
	}
	return "the sandbox of conversation " + e.info.Conversation + " is " + e.info.State + "; retry to resume it"
}

// Unwrap gives the resume's error class (errdefs) to errors.Is.
func (e *errAsleep) Unwrap() error { return e.wakeErr }

// wake resumes the sandbox a call found asleep, under its conversation's
// lock and within resumeTimeout.
func (m *Manager) wake(ctx context.Context, info Info) error {
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	unlock, err := m.convLocks.lock(ctx, convKey(info.Tenant, info.Conversation))
	if err != nil {
		return errdefs.DeadlineExceeded("the sandbox of conversation %s is %s and another operation on it did not finish within %s; retry", info.Conversation, info.State, resumeTimeout)
	}
	defer unlock()
	cur, err := m.inspectOwn(ctx, info.ID, info.Conversation)
	if err != nil {
		return err
	}
	if _, err := m.resumeLocked(ctx, cur); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errdefs.DeadlineExceeded("the sandbox of conversation %s was %s and did not resume within %s (%v); retry", info.Conversation, info.State, resumeTimeout, err)
		}
		return err
	}
	return nil
}

// withSince fills a state's time from the manager's record where the
// engine keeps none (a Docker pause).
func (m *Manager) withSince(info Info) Info {
	if !info.StateSince.IsZero() {
		return info
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.byID[info.ID]; e != nil && e.sinceState == info.State {
		info.StateSince = e.since
	}
	return info
}

// canHibernate reports whether the backend can hibernate info's sandbox.
func (m *Manager) canHibernate(info Info) bool {
	if _, ok := m.backend.(Hibernator); !ok {
		return false
	}
	if c, ok := m.backend.(HibernationChecker); ok {
		return c.Hibernatable(info)
	}
	return true
}
