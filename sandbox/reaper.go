package sandbox

import (
	"context"
	"time"
)

// reaper refreshes the map periodically, opens the pipes kept open
// (keep.go) and, with an idle TTL, removes sandboxes that nobody used for
// that long.
func (m *Manager) reaper() {
	defer m.wg.Done()
	every := m.opts.refreshEvery
	if ttl := m.opts.idleTTL; ttl > 0 && ttl/4 < every {
		every = max(ttl/4, 100*time.Millisecond)
	}
	// The lifecycles are looked at more often than the map is refreshed.
	tick := min(every, lifecycleEvery)
	t := time.NewTicker(tick)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(m.ctx, every+30*time.Second)
		if time.Since(last) >= every-tick/2 {
			last = time.Now()
			m.periodicRefresh(ctx)
			m.keepAttached()
			if m.opts.idleTTL > 0 {
				m.reap(ctx)
			}
		}
		m.idleLifecycles(ctx)
		cancel()
	}
}

func (m *Manager) periodicRefresh(ctx context.Context) {
	err := m.refresh(ctx, time.Now().Add(-m.opts.missRefresh))
	m.mu.Lock()
	wasFailing := m.refreshFail
	m.refreshFail = err != nil
	m.mu.Unlock()
	switch {
	case err != nil && !wasFailing:
		m.log.Warn("cannot refresh the sandbox map; serving from the cache", "err", err)
	case err == nil && wasFailing:
		m.log.Info("sandbox map refreshed again")
	}
}

// reap removes the sandboxes idle for the TTL, each under its conversation's
// lock so that it cannot race a Create or Delete of the same conversation.
func (m *Manager) reap(ctx context.Context) {
	now := m.opts.now()
	type victim struct{ id, tenant, conv string }
	var victims []victim
	m.mu.Lock()
	for id, e := range m.byID {
		if !e.removing && now.Sub(e.lastUsed) >= m.opts.idleTTL {
			victims = append(victims, victim{id, e.info.Tenant, e.info.Conversation})
		}
	}
	m.mu.Unlock()

	for _, v := range victims {
		unlock, err := m.convLocks.lock(ctx, convKey(v.tenant, v.conv))
		if err != nil {
			return
		}
		m.reapLocked(ctx, v.id)
		unlock()
	}
}

// reapLocked removes id if it is still idle and the reap gate lets it; the
// caller holds its conversation's lock.
func (m *Manager) reapLocked(ctx context.Context, id string) {
	idle := func() (Info, time.Duration, bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		e := m.byID[id]
		if e == nil || e.removing {
			return Info{}, 0, false
		}
		d := m.opts.now().Sub(e.lastUsed)
		return e.info, d, d >= m.opts.idleTTL
	}
	info, since, still := idle()
	if !still {
		return
	}
	if gate := m.opts.reapGate; gate != nil {
		release, ok := gate(ctx, info)
		if !ok {
			m.log.Debug("idle sandbox kept for now: the reap gate said no", "id", id, "conversation", info.Conversation)
			return
		}
		if release != nil {
			defer release()
		}
		// The gate may have taken a while; a call meanwhile keeps the sandbox.
		if info, since, still = idle(); !still {
			return
		}
	}
	if err := m.remove(ctx, id); err != nil {
		m.log.Warn("cannot remove idle sandbox", "id", id, "conversation", info.Conversation, "err", err)
		return
	}
	m.log.Info("removed idle sandbox", "id", id, "tenant", info.Tenant, "conversation", info.Conversation, "idle", since.Round(time.Second), "ttl", m.opts.idleTTL)
}
