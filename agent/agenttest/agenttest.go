// Package agenttest connects a real agent client to a real in-process agent
// daemon over a pipe, for tests of code that talks to the agent: the same
// protocol, confinement and process handling as in a sandbox, without a
// container.
package agenttest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
)

// Connect opens one more session to srv and closes it at cleanup, failing
// the test if the session does not end within 10 s of the client closing.
func Connect(t testing.TB, srv *daemon.Server) *agent.Client {
	t.Helper()
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeConn(context.Background(), b)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, a)
	if err != nil {
		t.Fatalf("agent.NewClient: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Errorf("the agent session did not end within 10s of the client closing")
		}
	})
	return c
}

// New starts a daemon (closed at cleanup, which kills what it spawned) and
// returns a client connected to it.
func New(t testing.TB, opts ...daemon.Option) (*agent.Client, *daemon.Server) {
	t.Helper()
	srv := daemon.New(opts...)
	t.Cleanup(func() { srv.Close() })
	return Connect(t, srv), srv
}
