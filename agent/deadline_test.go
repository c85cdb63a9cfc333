package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// fakeStuckAgent responds to hello and never to anything else, as an
// agent stuck in a file system would.
func fakeStuckAgent(c net.Conn) {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	sess, err := yamux.Server(c, cfg)
	if err != nil {
		return
	}
	defer sess.Close()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var req proto.Request
		proto.ReadFrame(st, &req)
		if req.Op == proto.OpHello {
			proto.WriteFrame(st, &proto.Response{Hello: &proto.HelloResponse{Version: proto.Version}})
			st.Close()
		}
	}
}

// A call the agent never responds to (its read is stuck) fails by its own
// deadline even when the caller's context has none, with an error message; the
// session stays usable for the calls after it.
func TestStuckCallEndsByItsOwnDeadline(t *testing.T) {
	a, b := net.Pipe()
	go fakeStuckAgent(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, a, agent.WithOpTimeouts(5*time.Second, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadFile(context.Background(), &proto.ReadFileRequest{Root: t.TempDir(), Path: "x"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errdefs.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "own deadline of 300ms") {
			t.Fatalf("stuck read = %v, want deadline_exceeded naming its own deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stuck read did not end by its own deadline")
	}
	if _, err := c.Hello(ctx); err != nil {
		t.Fatalf("hello after the stuck read: %v", err)
	}
}
