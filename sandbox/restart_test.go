package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// A sandbox that restarted under its pipe (its engine keeps the pipe open
// with nothing behind it): the call in flight ends with a sentence saying
// the sandbox restarted, not after the session's keepalive with "session
// ended", and the next call gets a new pipe that works.
func TestRestartUnderThePipe(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "r"})
	if err != nil {
		t.Fatal(err)
	}
	f.set(info.ID, func(i *Info) { i.Labels[LabelRuntime] = RuntimeGVisor })
	c, _, err := m.Agent(ctx, "acme", "r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."}); err != nil {
		t.Fatalf("a call before the restart = %v", err)
	}
	f.silence(info.ID)
	f.set(info.ID, func(i *Info) { i.Started = i.Started.Add(time.Second) })

	_, err = c.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "restarted during this call") {
		t.Fatalf("a call on the pipe the sandbox restarted under = %v, want unavailable saying the sandbox restarted", err)
	}
	if !strings.Contains(err.Error(), "gVisor") {
		t.Errorf("the restart of a gVisor sandbox does not name gVisor's limits: %v", err)
	}
	newPipeWorks(t, m, info, c)
}

// newPipeWorks checks that Agent, after info's sandbox restarted under
// pipe old, hands out another pipe and that a call on it works.
func newPipeWorks(t *testing.T, m *Manager, info Info, old *agent.Client) {
	t.Helper()
	ctx := testCtx(t)
	c, _, err := m.Agent(ctx, info.Tenant, info.Conversation)
	if err != nil {
		t.Fatalf("Agent after the restart = %v", err)
	}
	if c == old {
		t.Fatal("Agent handed out the pipe the sandbox restarted under")
	}
	if _, err := c.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."}); err != nil {
		t.Errorf("a call on the new pipe = %v", err)
	}
}

// A pipe idle through a restart is replaced before it is handed out, so
// the first call after the restart works; a pipe whose sandbox did not
// restart is kept.
func TestIdlePipeReplacedAfterRestart(t *testing.T) {
	f := newFake(t)
	obs := &countingObserver{}
	m := startManager(t, f, WithStateCheck(1), WithObserver(obs)) // re-read the state before every reuse
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "r"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "r")
	if err != nil {
		t.Fatal(err)
	}
	if again, _, err := m.Agent(ctx, "acme", "r"); err != nil || again != c {
		t.Fatalf("Agent without a restart = %p, %v; want the open pipe %p", again, err, c)
	}

	// The engine is restarting it: the call is told so, and to retry.
	f.silence(info.ID)
	f.set(info.ID, func(i *Info) { i.State, i.Restarting = StateStopped, true })
	_, _, err = m.Agent(ctx, "acme", "r")
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "is restarting") || strings.Contains(err.Error(), "delete it") {
		t.Fatalf("Agent while the engine restarts the sandbox = %v, want unavailable saying it is restarting", err)
	}
	// Started again: a new pipe, which works.
	f.set(info.ID, func(i *Info) { i.State, i.Restarting, i.Started = StateRunning, false, i.Started.Add(time.Second) })
	newPipeWorks(t, m, info, c)
	if _, _, reconnected := obs.get(); reconnected != 1 {
		t.Errorf("%d reconnects counted, want 1", reconnected)
	}
}

// A pipe the engine ends because the sandbox died, a moment before the
// engine reports the restart: the call in flight says the sandbox
// restarted, not that the session ended.
func TestPipeEndedByARestart(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "r"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "r")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", "touch started; sleep 30"}, Dir: info.Workspace, Timeout: time.Minute})
		done <- err
	}()
	eventually(t, "the exec starts", func() bool {
		_, err := os.Stat(filepath.Join(info.Workspace, "started"))
		return err == nil
	})
	// The engine reports the restart from its third reading on.
	f.mu.Lock()
	reads := 0
	f.inspectHook = func(b *Info) {
		if reads++; reads == 3 {
			b.Started = b.Started.Add(time.Second)
		}
	}
	f.mu.Unlock()
	f.cut(info.ID)
	err = <-done
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "restarted during this call") {
		t.Fatalf("a call whose pipe the engine ended as the sandbox restarted = %v, want unavailable saying it restarted", err)
	}
	if strings.Contains(err.Error(), "gVisor") {
		t.Errorf("a runc sandbox's restart names gVisor: %v", err)
	}
	c2, _, err := m.Agent(ctx, "acme", "r")
	if err != nil || c2 == c {
		t.Fatalf("Agent after the restart = %p, %v; want a new pipe", c2, err)
	}
}
