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

// pausedBehindBack: a sandbox paused in its engine is reported as paused, with
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

// pausedRightAfterCall: a sandbox paused in its engine right after a call,
// while its open pipe is still handed out without asking the engine (here
// for as long as the test runs, so that no state check can come first),
// makes the next call on that pipe fail within seconds, reported as paused
// with the way to unpause it, not hang until the session's keepalive gives
// up; the call after that is refused as paused at once, and after the
// unpause calls work again with the workspace as it was.
func (s *suite) pausedRightAfterCall(t *testing.T) {
	if s.cfg.pause == nil {
		t.Skip("this backend cannot pause a sandbox")
	}
	m := s.manager(t, sandbox.WithStateCheck(time.Hour))
	info := s.create(t, m, "c-paused-fast")
	c, _ := s.agent(t, m, "c-paused-fast")
	write := &proto.WriteFilesRequest{Root: info.Workspace, Files: []proto.WriteFile{{Path: "kept.txt", Data: []byte("kept")}}}
	if err := c.WriteFiles(ctx(t), write); err != nil {
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
	c, _, err := m.Agent(ctx(t), s.tenant, "c-paused-fast")
	if err != nil {
		t.Fatalf("Agent right after the pause = %v; want the open pipe, unchecked", err)
	}
	read := &proto.ReadFileRequest{Root: info.Workspace, Path: "kept.txt"}
	start := time.Now()
	_, err = c.ReadFile(ctx(t), read)
	checkPausedErr(t, "a read on the open pipe right after the pause", err)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the read on the paused sandbox took %s to fail; want a few seconds at most", el.Round(time.Millisecond))
	}
	start = time.Now()
	_, _, err = m.Agent(ctx(t), s.tenant, "c-paused-fast")
	checkPausedErr(t, "Agent after a call found the sandbox paused", err)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Agent on the paused sandbox took %s; want it refused at once", el.Round(time.Millisecond))
	}

	if err := s.cfg.unpause(ctx(t), info.ID); err != nil {
		t.Fatalf("unpause: %v", err)
	}
	unpaused = true
	s.waitState(t, s.b, info.ID, sandbox.StateRunning)
	c, _, err = m.Agent(ctx(t), s.tenant, "c-paused-fast")
	if err != nil {
		t.Fatalf("Agent after the unpause = %v, want the sandbox back", err)
	}
	rf, err := c.ReadFile(ctx(t), read)
	if err != nil || string(rf.Data) != "kept" {
		t.Fatalf("read after the unpause = %+v, %v; want the file written before the pause", rf, err)
	}
}

func checkPausedErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is paused") ||
		!strings.Contains(err.Error(), "unpause") || strings.Contains(err.Error(), "delete it") {
		t.Fatalf("%s on a paused sandbox = %v; want failed_precondition saying it is paused and how to unpause it", what, err)
	}
}
