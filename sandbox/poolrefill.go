package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
)

// refill is p's refiller: it keeps p at its size with at most poolConcurrency
// warm-ups at once and a backoff after failures, and drops warm sandboxes
// whose pipe dropped. On shutdown it closes the warm pipes and leaves the
// sandboxes running; the next start removes them.
func (m *Manager) refill(p *pool) {
	defer m.wg.Done()
	check := time.NewTicker(poolCheckEvery)
	defer check.Stop()
	for {
		for n := p.toStart(time.Now()); n > 0; n-- {
			m.wg.Add(1) // the refiller itself holds the group open
			go m.warmOne(p)
		}
		var retry <-chan time.Time
		var t *time.Timer
		if d := p.retryIn(time.Now()); d > 0 {
			t = time.NewTimer(d)
			retry = t.C
		}
		stop := false
		select {
		case <-m.ctx.Done():
			stop = true
		case <-p.kick:
		case <-retry:
		case <-check.C:
			m.dropDead(p)
		}
		if t != nil {
			t.Stop()
		}
		if stop {
			break
		}
	}
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, w := range ready {
		_ = w.c.Close()
	}
}

// warmOne makes, starts and attaches one pool sandbox.
func (m *Manager) warmOne(p *pool) {
	defer m.wg.Done()
	defer p.wake()
	ctx, cancel := context.WithTimeout(m.ctx, poolWarmTimeout)
	defer cancel()
	info, err := m.backend.Create(ctx, Spec{Image: p.spec.Image, Network: "none", Pool: p.key})
	if err != nil {
		err = m.backendErr("create a pool sandbox", err)
	} else {
		var c *agent.Client
		if c, err = m.attachWarm(ctx, info); err != nil {
			m.removeWarm(info.ID, "its agent did not answer")
		} else {
			if m.ctx.Err() != nil {
				_ = c.Close() // shutting down: left for the next start
				p.abandoned()
				return
			}
			p.warmed(warm{info: info, c: c}, nil, time.Now())
			m.log.Debug("pool sandbox ready", "id", info.ID, "image", p.spec.Image)
			return
		}
	}
	if m.ctx.Err() != nil {
		p.abandoned() // shutting down: not a failure of the pool
		return
	}
	p.warmed(warm{}, err, time.Now())
	m.log.Warn("pool cannot refill", "image", p.spec.Image, "err", err)
}

// attachWarm opens info's pipe and waits for the agent's hello.
func (m *Manager) attachWarm(ctx context.Context, info Info) (*agent.Client, error) {
	rwc, err := m.backend.AttachAgent(ctx, info.ID)
	if err != nil {
		return nil, m.backendErr("attach to the agent of pool sandbox "+info.ID, err)
	}
	c, err := agent.NewClient(ctx, rwc, m.stallOption(info.ID, info.Started), m.endOption(info.ID, info.Started))
	if err != nil {
		_ = rwc.Close()
		return nil, errdefs.Unavailable("the agent in pool sandbox %s did not answer: %v", info.ID, err)
	}
	return c, nil
}

// removeWarm removes a pool sandbox nobody claimed; a failure is logged,
// and the next start tries again.
func (m *Manager) removeWarm(id, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), removeTimeout)
	defer cancel()
	if err := m.backend.Remove(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("cannot remove a pool sandbox", "id", id, "reason", why, "err", err)
		return
	}
	m.log.Info("pool sandbox removed", "id", id, "reason", why)
}

// dropDead removes the warm sandboxes whose pipe dropped.
func (m *Manager) dropDead(p *pool) {
	p.mu.Lock()
	var dead []warm
	keep := p.ready[:0]
	for _, w := range p.ready {
		if isDone(w.c) {
			dead = append(dead, w)
		} else {
			keep = append(keep, w)
		}
	}
	p.ready = keep
	p.mu.Unlock()
	for _, w := range dead {
		m.removeWarm(w.info.ID, "its agent pipe dropped")
	}
	if len(dead) > 0 {
		p.wake()
	}
}

// startPools removes the unclaimed pool sandboxes a previous sandboxd
// left, then starts one refiller per pool. Leftovers are never adopted: a
// restarted sandboxd hands out only sandboxes it made and attached itself,
// so one whose claim record was lost can never reach a second owner.
func (m *Manager) startPools() {
	defer m.wg.Done()
	ctx, cancel := context.WithTimeout(m.ctx, poolWarmTimeout)
	infos, err := m.backend.List(ctx)
	cancel()
	if err != nil {
		m.log.Warn("cannot list leftover pool sandboxes; they stay until the next start", "err", err)
	}
	for _, info := range infos {
		if !unclaimed(info) || !m.dep.Owns(info.Labels) {
			continue
		}
		// Read again right before: another replica may have claimed it
		// since the listing.
		ictx, cancel := context.WithTimeout(m.ctx, stateReadTimeout)
		now, err := m.backend.Inspect(ictx, info.ID)
		cancel()
		if err == nil && unclaimed(now) {
			m.removeWarm(info.ID, "left unclaimed by a previous sandboxd")
		}
	}
	if m.ctx.Err() != nil {
		return
	}
	m.wg.Add(len(m.pools)) // this goroutine still holds the group open
	for _, p := range m.pools {
		go m.refill(p)
	}
}

// unclaimed tells a pool sandbox nobody has claimed.
func unclaimed(info Info) bool {
	return info.Labels[LabelPool] != "" && info.Tenant == "" && info.Conversation == ""
}
