package vibe

import (
	"context"
	"maps"
	"testing"
	"time"
)

// Counts follows the workers through their states and forgets them with
// their run.
func TestCounts(t *testing.T) {
	m, _, _ := newTestManager(t, 5)
	if got := m.Counts(); len(got) != 0 {
		t.Fatalf("counts before any worker = %v, want none", got)
	}
	ctx := context.Background()
	done, _ := m.Spawn(ctx, parent, "echo ok", "done", "")
	failed, _ := m.Spawn(ctx, parent, "exit 3", "failed", "")
	killed, _ := m.Spawn(ctx, parent, "sleep 30", "killed", "")
	m.Spawn(ctx, parent, "sleep 30", "running", "")
	for _, id := range []string{done, failed} {
		if st, err := m.Wait(ctx, "p1", id, 10*time.Second); err != nil || st.State == StateRunning {
			t.Fatalf("worker %s: %+v %v", id, st, err)
		}
	}
	if _, err := m.Kill("p1", killed); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Wait(ctx, "p1", killed, 10*time.Second); st.State != StateKilled {
		t.Fatalf("killed worker: %+v", st)
	}
	want := map[string]int{StateDone: 1, StateFailed: 1, StateKilled: 1, StateRunning: 1}
	if got := m.Counts(); !maps.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	m.EndRun("p1")
	if got := m.Counts(); len(got) != 0 {
		t.Fatalf("counts after the run ended = %v, want none", got)
	}
}
