package agent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// A call whose session the other side ends (the engine closed the exec
// stream of a sandbox that died) ends with the owner's sentence about the
// sandbox, not "the session has ended"; a session ended by Close asks
// nobody.
func TestEndedSessionIsExplainedByTheOwner(t *testing.T) {
	var asked atomic.Int32
	srv := daemon.New()
	t.Cleanup(func() { srv.Close() })
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, a, agent.WithEndCheck(func(context.Context) error {
		asked.Add(1)
		return errdefs.Unavailable("the sandbox restarted")
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", "touch started; sleep 30"}, Dir: dir, Timeout: time.Minute})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec did not start within 10 s")
		}
	}
	b.Close() // the agent's end of the pipe goes
	err = <-done
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "the sandbox restarted") {
		t.Fatalf("a call whose session ended under it = %v, want the owner's sentence", err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the owner was asked %d times, want once", n)
	}

	// Closed by its owner: the session's own sentence, nobody asked.
	a2, b2 := net.Pipe()
	go srv.ServeConn(context.Background(), b2)
	c2, err := agent.NewClient(ctx, a2, agent.WithEndCheck(func(context.Context) error {
		asked.Add(1)
		return errdefs.Unavailable("the sandbox restarted")
	}))
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if _, err := c2.Stat(ctx, &proto.StatRequest{Root: t.TempDir(), Path: "."}); err == nil || !strings.Contains(err.Error(), "session has ended") {
		t.Errorf("a call on a closed client = %v, want the session's end", err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the owner was asked about a session its client closed (%d questions in all)", n)
	}
}
