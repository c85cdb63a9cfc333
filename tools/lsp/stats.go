package lsp

import "maps"

// Stats is what the metrics read from a Manager at scrape time.
type Stats struct {
	// Servers counts the running language servers by language.
	Servers map[string]int
	// Restarts counts servers restarted after a crash since the Manager
	// was made, by language (a reload is not a crash restart).
	Restarts map[string]uint64
}

// Stats returns the running servers and the crash restarts so far.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	sups := make([]*supervisor, 0, len(m.sups))
	for _, s := range m.sups {
		sups = append(sups, s)
	}
	m.mu.Unlock()
	st := Stats{Servers: map[string]int{}}
	for _, s := range sups {
		for _, srv := range s.running() {
			st.Servers[srv.lang.Name]++
		}
	}
	m.restartsMu.Lock()
	st.Restarts = maps.Clone(m.restarts)
	m.restartsMu.Unlock()
	return st
}

func (m *Manager) countRestart(lang string) {
	m.restartsMu.Lock()
	m.restarts[lang]++
	m.restartsMu.Unlock()
}
