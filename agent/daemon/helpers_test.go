package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/daemon"
)

// startPair serves a new Server over an in-memory pipe and returns a client
// for it; both are closed when the test ends.
func startPair(t *testing.T, opts ...daemon.Option) (*daemon.Server, *agent.Client) {
	t.Helper()
	srv := daemon.New(opts...)
	c := connect(t, srv)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return srv, c
}

// connect opens one more session to srv.
func connect(t *testing.T, srv *daemon.Server) *agent.Client {
	t.Helper()
	return agenttest.Connect(t, srv)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
