package lsp_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Stats counts the running server by language, stops counting it when it
// is killed, and counts the crash restart the next call makes.
func TestStatsServersAndRestarts(t *testing.T) {
	bx := newLocalBox(t, "twice")
	if st := bx.lsp.Stats(); len(st.Servers) != 0 || len(st.Restarts) != 0 {
		t.Fatalf("stats before any server = %+v, want none", st)
	}
	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "BAD\n"}, "1 new problem(s)")
	if st := bx.lsp.Stats(); !maps.Equal(st.Servers, map[string]int{"fake": 1}) || len(st.Restarts) != 0 {
		t.Fatalf("stats with one server = %+v, want fake: 1 and no restarts", st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	procs, err := bx.conn.Agent.List(ctx, &proto.ListRequest{Labels: map[string]string{"sandboxd.role": "lsp"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Running {
			if err := bx.conn.Agent.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for bx.lsp.Stats().Servers["fake"] != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a killed server still counts after 10 s: %+v", bx.lsp.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}

	bx.ok("write", map[string]any{"path": "proj/a.fk", "content": "BAD\nBAD\n"}, "proj/a.fk:2: error")
	st := bx.lsp.Stats()
	if !maps.Equal(st.Servers, map[string]int{"fake": 1}) || !maps.Equal(st.Restarts, map[string]uint64{"fake": 1}) {
		t.Fatalf("stats after the crash restart = %+v, want fake: 1 server, 1 restart", st)
	}
	// A reload is asked for, not a crash: it is not counted.
	bx.ok("lsp", map[string]any{"action": "reload"}, "restarted")
	if st := bx.lsp.Stats(); st.Restarts["fake"] != 1 {
		t.Fatalf("restarts after a reload = %d, want still 1", st.Restarts["fake"])
	}
}
