package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Stats is a sandbox's resource use as its engine reports it.
type Stats struct {
	CPUPercent       float64 // of one CPU: 200 is two CPUs busy
	MemoryBytes      uint64  // in use, the page cache left out
	MemoryLimitBytes uint64  // 0: no limit reported
	Pids             uint64
	ReadAt           time.Time
}

// ErrNoStats is the class of a Stats error that means the backend reports
// no resource use (not a failure: there is nothing to show).
var ErrNoStats = errors.New("resource use not available")

// StatsReader is an optional Backend capability: one reading of a
// sandbox's resource use.
type StatsReader interface {
	Stats(ctx context.Context, id string) (Stats, error)
}

// Stats reads the tenant's sandbox's resource use from the backend. Another
// tenant's sandbox, or another deployment's, is NotFound; a backend without
// the capability returns an error that is ErrNoStats.
func (m *Manager) Stats(ctx context.Context, tenant, id string) (Stats, error) {
	if _, err := m.Get(ctx, tenant, id); err != nil {
		return Stats{}, err
	}
	sr, ok := m.backend.(StatsReader)
	if !ok {
		return Stats{}, fmt.Errorf("the %s backend does not report resource use: %w", m.name, ErrNoStats)
	}
	st, err := sr.Stats(ctx, id)
	if err != nil && !errors.Is(err, ErrNoStats) {
		return Stats{}, m.backendErr("read the resource use of sandbox "+id, err)
	}
	return st, err
}
