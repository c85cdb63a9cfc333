package sandbox

import (
	"context"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// statsBackend is the fake backend with the StatsReader capability.
type statsBackend struct {
	*fakeBackend
	asked []string
}

func (s *statsBackend) Stats(ctx context.Context, id string) (Stats, error) {
	s.asked = append(s.asked, id)
	return Stats{MemoryBytes: 42 << 20, Pids: 3}, nil
}

func TestStatsOnlyOfTheTenantsOwnSandbox(t *testing.T) {
	b := &statsBackend{fakeBackend: newFake(t)}
	m := NewManager(b)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Stats(ctx, "acme", info.ID)
	if err != nil || st.MemoryBytes != 42<<20 || st.Pids != 3 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	if _, err := m.Stats(ctx, "globex", info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's Stats = %v, want not found", err)
	}
	if len(b.asked) != 1 {
		t.Fatalf("the engine was asked %d times, want once (never for another tenant)", len(b.asked))
	}
}

func TestStatsWithoutTheCapabilityIsErrNoStats(t *testing.T) {
	f := newFake(t)
	m := NewManager(f)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stats(ctx, "acme", info.ID); !errors.Is(err, ErrNoStats) {
		t.Fatalf("Stats = %v, want ErrNoStats", err)
	}
}
