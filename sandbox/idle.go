package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/agent"
)

// LabelLifecycle holds a sandbox's automatic lifecycle as JSON (Lifecycle);
// on Kubernetes it is an annotation.
const LabelLifecycle = "io.sandboxd.lifecycle"

// Lifecycle says what idleness does to a sandbox: after PauseAfter without
// a call, process output or preview request it is paused, after
// HibernateAfter hibernated, after DeleteAfter deleted. Zero is never.
type Lifecycle struct {
	PauseAfter     time.Duration `json:"-"`
	HibernateAfter time.Duration `json:"-"`
	DeleteAfter    time.Duration `json:"-"`
}

// lifecycleJSON is Lifecycle on the label, in whole seconds as the API has it.
type lifecycleJSON struct {
	PauseAfter     int64 `json:"pause_after_s,omitempty"`
	HibernateAfter int64 `json:"hibernate_after_s,omitempty"`
	DeleteAfter    int64 `json:"delete_after_s,omitempty"`
}

// IsZero reports whether l does nothing.
func (l Lifecycle) IsZero() bool { return l == Lifecycle{} }

// LifecycleLabels are the labels a backend stamps for spec's lifecycle
// (none for a zero one).
func LifecycleLabels(spec Spec) map[string]string {
	if spec.Lifecycle.IsZero() {
		return nil
	}
	l := spec.Lifecycle
	b, _ := json.Marshal(lifecycleJSON{int64(l.PauseAfter / time.Second), int64(l.HibernateAfter / time.Second), int64(l.DeleteAfter / time.Second)})
	return map[string]string{LabelLifecycle: string(b)}
}

// LifecycleOf is the lifecycle info was created with (zero without the
// label).
func LifecycleOf(info Info) (Lifecycle, error) {
	raw, ok := info.Labels[LabelLifecycle]
	if !ok {
		return Lifecycle{}, nil
	}
	var j lifecycleJSON
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return Lifecycle{}, fmt.Errorf("the lifecycle label of sandbox %s does not parse (%v)", info.ID, err)
	}
	return Lifecycle{time.Duration(j.PauseAfter) * time.Second, time.Duration(j.HibernateAfter) * time.Second, time.Duration(j.DeleteAfter) * time.Second}, nil
}

// Touch counts as use of sandbox id for its lifecycle (a preview request,
// output read by a client): the idle time starts again.
func (m *Manager) Touch(id string) {
	m.mu.Lock()
	if e := m.byID[id]; e != nil {
		e.lastUsed = m.opts.now()
	}
	m.mu.Unlock()
}

// lifecycleOf is the effective lifecycle of info: l, its own label as its
// entry parsed it (err where the label did not parse), else the policy's
// default for it.
func (m *Manager) lifecycleOf(info Info, l Lifecycle, err error) Lifecycle {
	if err != nil {
		m.log.Warn("ignoring a sandbox's lifecycle", "id", info.ID, "err", err)
		return Lifecycle{}
	}
	if l.IsZero() && m.opts.lifecycle != nil {
		l = m.opts.lifecycle(info)
	}
	return l
}

// idleStep is what a sandbox's idleness calls for now.
type idleStep int

const (
	stayAwake idleStep = iota
	doPause
	doHibernate
	doDelete
)

// stepFor is the deepest step l calls for after idle in info's state; a
// step the backend cannot take is skipped for the next one.
func (m *Manager) stepFor(l Lifecycle, info Info, idle time.Duration) idleStep {
	_, canPause := m.backend.(Freezer)
	canHibernate := m.canHibernate(info)
	state := info.State
	switch {
	case l.DeleteAfter > 0 && idle >= l.DeleteAfter:
		return doDelete
	case l.HibernateAfter > 0 && idle >= l.HibernateAfter && canHibernate && (state == StateRunning || state == StatePaused):
		return doHibernate
	case l.PauseAfter > 0 && idle >= l.PauseAfter && canPause && state == StateRunning:
		return doPause
	}
	return stayAwake
}

// lifecycleEvery is the reaper's period when some sandbox has a lifecycle:
// a pause_after of 2 s is taken within about a second.
const lifecycleEvery = 500 * time.Millisecond

// idleLifecycles takes the steps the sandboxes' idleness calls for. Before
// a step, a sandbox with an open pipe is asked when its processes last
// printed: output is use. Each step runs under the conversation's lock and
// the reap gate (a replica acts only for the conversations it owns).
func (m *Manager) idleLifecycles(ctx context.Context) {
	m.mu.Lock()
	due := m.dueExpiriesLocked()
	m.mu.Unlock()
	for _, info := range due {
		m.expire(ctx, info)
	}

	var now time.Time // read once a sandbox has a lifecycle
	type cand struct {
		info   Info
		l      Lifecycle
		idle   time.Duration
		client *agent.Client
	}
	var cands []cand
	m.mu.Lock()
	for _, e := range m.byID {
		if e.removing || e.info.Conversation == "" {
			continue
		}
		l := m.lifecycleOf(e.info, e.lifecycle, e.lifecycleErr)
		if l.IsZero() {
			continue
		}
		if now.IsZero() {
			now = m.opts.now()
		}
		idle := now.Sub(e.lastUsed)
		if m.stepFor(l, e.info, idle) == stayAwake {
			continue
		}
		c := e.client
		if c != nil && isDone(c) {
			c = nil
		}
		cands = append(cands, cand{e.info, l, idle, c})
	}
	m.mu.Unlock()

	for _, c := range cands {
		if c.client != nil && c.info.State == StateRunning {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last, err := lastOutput(actx, c.client, m.opts.now())
			cancel()
			if err == nil && !last.IsZero() && m.opts.now().Sub(last) < c.idle {
				m.mu.Lock()
				if e := m.byID[c.info.ID]; e != nil && e.lastUsed.Before(last) {
					e.lastUsed = last
				}
				m.mu.Unlock()
				if m.stepFor(c.l, c.info, m.opts.now().Sub(last)) == stayAwake {
					continue
				}
			}
		}
		m.idleStepLocked(ctx, c.info)
	}
}

// idleStepLocked takes info's step under its conversation's lock and the
// reap gate, reading its idleness again once both are held.
func (m *Manager) idleStepLocked(ctx context.Context, info Info) {
	unlock, err := m.convLocks.lock(ctx, convKey(info.Tenant, info.Conversation))
	if err != nil {
		return
	}
	defer unlock()
	if gate := m.opts.reapGate; gate != nil {
		release, ok := gate(ctx, info)
		if !ok {
			return
		}
		if release != nil {
			defer release()
		}
	}
	m.mu.Lock()
	e := m.byID[info.ID]
	if e == nil || e.removing {
		m.mu.Unlock()
		return
	}
	cur, idle, own, ownErr := e.info, m.opts.now().Sub(e.lastUsed), e.lifecycle, e.lifecycleErr
	m.mu.Unlock()
	l := m.lifecycleOf(cur, own, ownErr)
	var err2 error
	switch step := m.stepFor(l, cur, idle); step {
	case stayAwake:
		return
	case doPause:
		err2 = m.stepTo(ctx, cur, StatePaused, func() error { return m.backend.(Freezer).Pause(ctx, cur.ID) })
	case doHibernate:
		m.Detach(cur.ID, "hibernating after idleness")
		err2 = m.stepTo(ctx, cur, StateHibernated, func() error { return m.backend.(Hibernator).Hibernate(ctx, cur.ID) })
	case doDelete:
		err2 = m.remove(ctx, cur.ID)
		if err2 == nil {
			m.log.Info("deleted idle sandbox", "id", cur.ID, "tenant", cur.Tenant, "conversation", cur.Conversation, "idle", idle.Round(time.Second), "delete_after", l.DeleteAfter)
		}
	}
	if err2 != nil {
		m.log.Warn("cannot take an idle sandbox's lifecycle step", "id", cur.ID, "conversation", cur.Conversation, "err", err2)
	}
}

// stepTo runs do and waits for the engine to report state.
func (m *Manager) stepTo(ctx context.Context, info Info, state string, do func() error) error {
	if err := do(); err != nil {
		return err
	}
	if _, err := m.settle(ctx, info.ID, info.Conversation, state); err != nil {
		return err
	}
	m.log.Info("idle sandbox "+state, "id", info.ID, "tenant", info.Tenant, "conversation", info.Conversation)
	got := info
	got.State = state
	m.changed(got, changeOf(state))
	return nil
}

// lastOutput is when the sandbox's processes last printed, on now's clock
// (the agent's is only compared with itself); zero when they have not.
func lastOutput(ctx context.Context, c *agent.Client, now time.Time) (time.Time, error) {
	a, err := c.Activity(ctx)
	if err != nil || a.LastOutput.IsZero() {
		return time.Time{}, err
	}
	return now.Add(-a.At.Sub(a.LastOutput)), nil
}
