package sandbox

import (
	"context"
	"time"
)

// reaper refreshes the map periodically and, with an idle TTL, removes
// sandboxes that nobody used for that long.
func (m *Manager) reaper() {
	defer m.wg.Done()
	every := m.opts.refreshEvery
	if ttl := m.opts.idleTTL; ttl > 0 && ttl/4 < every {
		every = max(ttl/4, 100*time.Millisecond)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(m.ctx, every+30*time.Second)
		m.periodicRefresh(ctx)
		if m.opts.idleTTL > 0 {
			m.reap(ctx)
		}
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
		m.mu.Lock()
		e := m.byID[v.id]
		idle := time.Duration(0)
		still := e != nil && !e.removing
		if still {
			idle = m.opts.now().Sub(e.lastUsed)
			still = idle >= m.opts.idleTTL
		}
		m.mu.Unlock()
		if still {
			if err := m.remove(ctx, v.id); err != nil {
				m.log.Warn("cannot remove idle sandbox", "id", v.id, "conversation", v.conv, "err", err)
			} else {
				m.log.Info("removed idle sandbox", "id", v.id, "tenant", v.tenant, "conversation", v.conv, "idle", idle.Round(time.Second), "ttl", m.opts.idleTTL)
			}
		}
		unlock()
	}
}
