package sandboxtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// pausedBehindBack: a sandbox paused in its engine is told as paused, with
// the way to unpause it and never the advice to delete it, both to a
// manager with an open pipe and to one that must dial; after the unpause
// the next call works, with the workspace as it was.
func (s *suite) pausedBehindBack(t *testing.T) {
	if s.cfg.pause == nil {
		t.Skip("this backend cannot pause a sandbox")
	}
	m := s.manager(t)
	info := s.create(t, m, "c-paused")
	c, _ := s.agent(t, m, "c-paused")
	if err := c.WriteFiles(ctx(t), &proto.WriteFilesRequest{Root: info.Workspace, Files: []proto.WriteFile{{Path: "kept.txt", Data: []byte("kept")}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.cfg.pause(ctx(t), info.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	unpaused := false
	t.Cleanup(func() {
		if !unpaused {
			_ = s.cfg.unpause(ctx(t), info.ID)
		}
	})
	s.waitState(t, s.b, info.ID, sandbox.StatePaused)

	// The open pipe is handed out again only after the engine is asked, at
	// most a state-check interval after the pause.
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, _, err = m.Agent(ctx(t), s.tenant, "c-paused")
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkPausedErr(t, "Agent with an open pipe", err)
	// A manager without a pipe (a restarted sandboxd) never dials into it.
	m2 := s.manager(t)
	_, _, err = m2.Agent(ctx(t), s.tenant, "c-paused")
	checkPausedErr(t, "Agent of a new manager", err)
	if got, err := m.Get(ctx(t), s.tenant, info.ID); err != nil || got.State != sandbox.StatePaused {
		t.Errorf("Get of the paused sandbox = %+v, %v; want state paused", got, err)
	}

	if err := s.cfg.unpause(ctx(t), info.ID); err != nil {
		t.Fatalf("unpause: %v", err)
	}
	unpaused = true
	s.waitState(t, s.b, info.ID, sandbox.StateRunning)
	for _, mm := range []*sandbox.Manager{m, m2} {
		c, got, err := mm.Agent(ctx(t), s.tenant, "c-paused")
		if err != nil {
			t.Fatalf("Agent after the unpause = %v, want the sandbox back", err)
		}
		rf, err := c.ReadFile(ctx(t), &proto.ReadFileRequest{Root: got.Workspace, Path: "kept.txt"})
		if err != nil || string(rf.Data) != "kept" {
			t.Fatalf("read after the unpause = %+v, %v; want the file written before the pause", rf, err)
		}
	}
}

func checkPausedErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is paused") ||
		!strings.Contains(err.Error(), "unpause") || strings.Contains(err.Error(), "delete it") {
		t.Fatalf("%s on a paused sandbox = %v; want failed_precondition saying it is paused and how to unpause it", what, err)
	}
}
