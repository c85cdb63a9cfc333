package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// poolFor is the pool that can serve spec, nil when none can. A pool
// sandbox is made with the defaults only (resources, no network, no env,
// its own workspace volume, no-new-privileges, runc, a writable root). Its env is set at the
// claim, through the agent (handOver); the others cannot change after the
// fact, so a spec asking for any of them is created cold.
func (m *Manager) poolFor(spec Spec) *pool {
	if len(m.pools) == 0 || spec.Pool != "" || spec.HostWorkspace != "" ||
		spec.Resources != (Resources{}) || (spec.Network != "" && spec.Network != "none") || !spec.Lifecycle.IsZero() || spec.Snapshot != "" || spec.Setuid ||
		(spec.Runtime != "" && spec.Runtime != RuntimeRunc) || spec.ReadOnlyRoot {
		return nil
	}
	return m.pools[spec.Image]
}

// claim hands one of p's warm sandboxes to spec's conversation; false
// means none could be, and the caller creates one cold. The caller holds
// the conversation's lock. A warm sandbox is handed out once at most: one
// that fails the hello or the engine's claim is removed, never put back.
func (m *Manager) claim(ctx context.Context, p *pool, spec Spec) (Info, bool) {
	claimer, ok := m.backend.(Claimer)
	if !ok {
		return Info{}, false
	}
	for attempt := 0; attempt < claimAttempts; attempt++ {
		w, ok := p.take()
		if !ok {
			if attempt == 0 {
				p.count(PoolEmpty)
			} else {
				p.count(PoolFailed)
			}
			return Info{}, false
		}
		info, err := m.handOver(ctx, claimer, w, spec)
		if errors.Is(err, errNoSandboxEnv) {
			// Not this spec's, but good for the next one without env.
			p.putBack(w)
			p.count(PoolFailed)
			m.log.Warn("pool sandbox cannot take a claim's env; created cold", "id", w.info.ID, "image", p.spec.Image, "err", err)
			return Info{}, false
		}
		// The refill starts after the hand-over, not beside it: its engine
		// calls would only slow the claim down.
		p.wake()
		if err == nil {
			p.count(PoolClaimed)
			m.log.Info("sandbox claimed from the pool", "id", info.ID, "tenant", info.Tenant, "conversation", info.Conversation, "image", info.Image)
			return info, true
		}
		m.log.Warn("pool sandbox not handed out", "id", w.info.ID, "image", p.spec.Image, "err", err)
	}
	p.count(PoolFailed)
	return Info{}, false
}

// errNoSandboxEnv: the warm sandbox's agent cannot set a sandbox's env.
var errNoSandboxEnv = errdefs.FailedPrecondition("the pool sandbox's agent predates setting a sandbox's environment")

// handOver checks that w's agent still responds, claims w in the engine
// for spec's owner, sets spec's env through the agent and maps it with its
// open pipe. The env is set after the engine's claim, so that a claim lost
// to another replica leaves that replica's sandbox untouched, and before
// the pipe is mapped, so that no command of the conversation starts
// without it.
func (m *Manager) handOver(ctx context.Context, claimer Claimer, w warm, spec Spec) (Info, error) {
	if isDone(w.c) {
		m.discard(w, "its agent pipe dropped")
		return Info{}, errdefs.Unavailable("the agent pipe of pool sandbox %s dropped", w.info.ID)
	}
	hctx, cancel := context.WithTimeout(ctx, claimHelloTimeout)
	h, err := w.c.Hello(hctx)
	cancel()
	if err != nil {
		m.discard(w, "its agent did not answer a hello")
		return Info{}, errdefs.Unavailable("the agent of pool sandbox %s did not answer: %v", w.info.ID, err)
	}
	if len(spec.Env) > 0 && !h.SandboxEnv {
		return Info{}, errNoSandboxEnv
	}
	info, err := claimer.Claim(ctx, w.info, Owner{Tenant: spec.Tenant, Conversation: spec.Conversation, Labels: ClaimLabels(spec)})
	if errors.Is(err, errdefs.ErrConflict) {
		_ = w.c.Close() // another replica's now: not ours to remove
		return Info{}, err
	}
	if err != nil {
		// The claim may have landed anyway; a half-claimed sandbox must not
		// stay beside the cold one the caller makes now.
		m.discard(w, "the engine did not record the claim")
		return Info{}, m.backendErr("claim pool sandbox "+w.info.ID, err)
	}
	if len(spec.Env) > 0 {
		ectx, cancel := context.WithTimeout(ctx, claimHelloTimeout)
		err := w.c.SetEnv(ectx, spec.Env)
		cancel()
		if err != nil {
			// Ours in the engine now, but without the env it was claimed
			// with it must not serve the conversation.
			m.discard(w, "its agent did not take the claim's env")
			return Info{}, fmt.Errorf("set the env of pool sandbox %s: %w", w.info.ID, err)
		}
	}
	c := w.c
	if hook := m.opts.attachHook; hook != nil {
		if err := hook(ctx, info, c); err != nil {
			// Mapped without a pipe: the next Agent call opens one and runs
			// the hook again, with that call's error should it fail again.
			m.log.Warn("attach hook refused the claimed sandbox's pipe; a new one will be opened", "id", info.ID, "err", err)
			_ = c.Close()
			c = nil
		}
	}
	m.mu.Lock()
	e := m.insertLocked(info)
	e.lastUsed = m.opts.now()
	if c != nil && !m.closed {
		e.client, e.clientStarted = c, w.info.Started
		e.opened = true
		e.checked = time.Now()
		m.opts.observer.PipeOpened(m.name)
		m.wg.Add(1)
		go m.watch(e, c)
		c = nil
	}
	m.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	return info, nil
}

// discard closes w's pipe and removes it in the background.
func (m *Manager) discard(w warm, why string) {
	_ = w.c.Close()
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.wg.Add(1)
	}
	m.mu.Unlock()
	if closed {
		return // the next start's adoption removes it
	}
	go func() {
		defer m.wg.Done()
		m.removeWarm(w.info.ID, why)
	}()
}
