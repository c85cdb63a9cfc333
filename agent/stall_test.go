package agent_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// frozenConn is the agent's end of the pipe that can be frozen, as a
// paused container is: while frozen it reads nothing, so nothing the
// client sends gets a response (net.Pipe has no buffer: the client's writes
// wait too).
type frozenConn struct {
	net.Conn
	mu     sync.Mutex // guards frozen and thaw
	frozen bool
	thaw   chan struct{}
}

func (f *frozenConn) freeze() {
	f.mu.Lock()
	f.frozen, f.thaw = true, make(chan struct{})
	f.mu.Unlock()
}

func (f *frozenConn) unfreeze() {
	f.mu.Lock()
	if f.frozen {
		f.frozen = false
		close(f.thaw)
	}
	f.mu.Unlock()
}

// Read holds what it read while frozen: the daemon's read may have been
// waiting before the freeze.
func (f *frozenConn) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	f.mu.Lock()
	frozen, thaw := f.frozen, f.thaw
	f.mu.Unlock()
	if frozen {
		<-thaw
	}
	return n, err
}

// stallPair is a client on a real agent daemon whose end of the pipe can
// be frozen; check is the client's stall check.
func stallPair(t *testing.T, check func(context.Context) error) (*agent.Client, *frozenConn) {
	t.Helper()
	srv := daemon.New()
	a, b := net.Pipe()
	fc := &frozenConn{Conn: b}
	go srv.ServeConn(context.Background(), fc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, a, agent.WithStallCheck(200*time.Millisecond, check))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.unfreeze(); c.Close(); srv.Close() })
	return c, fc
}

// A call on a pipe that stops responding ends within about two stall
// waits with the owner's error message (the engine says paused), not after
// the session's keepalive; once the agent responds again, so do calls.
func TestStalledCallEndsWithTheOwnersSentence(t *testing.T) {
	var paused atomic.Bool
	c, fc := stallPair(t, func(context.Context) error {
		if paused.Load() {
			return errdefs.FailedPrecondition("the sandbox is paused; unpause it")
		}
		return nil
	})
	dir := t.TempDir()
	stat := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := c.Stat(ctx, &proto.StatRequest{Root: dir, Path: "."})
		return err
	}
	if err := stat(); err != nil {
		t.Fatalf("stat before the freeze: %v", err)
	}
	paused.Store(true)
	fc.freeze()
	start := time.Now()
	err := stat()
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != "the sandbox is paused; unpause it" {
		t.Fatalf("stat on the frozen pipe = %v; want the stall check's error", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("stat on the frozen pipe took %s; want it to end within a few stall waits", el)
	}
	paused.Store(false)
	fc.unfreeze()
	if err := stat(); err != nil {
		t.Fatalf("stat after the thaw: %v", err)
	}
}

// A call that takes long on an agent that responds to pings (a long
// command) never asks the owner, and ends with its own response.
func TestLongCallOnALiveAgentIsNotChecked(t *testing.T) {
	var asked atomic.Int32
	c, _ := stallPair(t, func(context.Context) error {
		asked.Add(1)
		return errdefs.FailedPrecondition("asked")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", "sleep 1.5; echo done"}})
	if err != nil || string(res.Stdout) != "done\n" {
		t.Fatalf("exec = %+v, %v; want done", res, err)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the stall check was asked %d times about an agent that answers pings", n)
	}
}
