package sandbox

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/agent"
)

// refresh re-reads the map from the backend unless a listing started after
// notBefore (so a burst of cache misses costs one List). Sandboxes that
// appeared are added, states are updated, and those that vanished are
// dropped, except ones inserted or removed after this listing started.
func (m *Manager) refresh(ctx context.Context, notBefore time.Time) error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()

	m.mu.Lock()
	if !m.lastListAt.IsZero() && m.lastListAt.After(notBefore) {
		m.mu.Unlock()
		return nil
	}
	before := m.gen
	m.mu.Unlock()

	listAt := time.Now()
	infos, err := m.backend.List(ctx)
	if err != nil {
		return m.backendErr("list sandboxes", err)
	}

	var closing []*agent.Client
	var added, dropped []string
	m.mu.Lock()
	seen := make(map[string]bool, len(infos))
	for _, info := range infos {
		if info.ID == "" || info.Tenant == "" || info.Conversation == "" {
			continue // carries our managed label but is not mapped to anyone
		}
		if !m.dep.Owns(info.Labels) {
			continue // another deployment's (the backend filters too)
		}
		seen[info.ID] = true
		if g, ok := m.tombstones[info.ID]; ok && g > before {
			continue // removed while we listed
		}
		if e := m.byID[info.ID]; e != nil {
			if e.expiryWritten.After(listAt) {
				// Written here since the listing began: ours is newer.
				info = withLabel(info, LabelExpiry, e.info.Labels[LabelExpiry])
			}
			e.setInfo(info)
			continue
		}
		m.insertLocked(info)
		added = append(added, info.ID)
	}
	for id, e := range m.byID {
		if !seen[id] && e.gen <= before && !e.removing {
			if c := m.dropLocked(id); c != nil {
				closing = append(closing, c)
			}
			dropped = append(dropped, id)
		}
	}
	for id, g := range m.tombstones {
		if g <= before {
			delete(m.tombstones, id)
		}
	}
	m.lastListAt = listAt
	m.mu.Unlock()

	for _, c := range closing {
		_ = c.Close()
	}
	for _, id := range dropped {
		m.log.Info("sandbox removed outside sandboxd; dropped from the map", "id", id)
	}
	if len(added) > 0 {
		m.log.Debug("sandboxes found in the backend", "ids", added)
	}
	return nil
}
