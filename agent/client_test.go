package agent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

func pair(tb testing.TB) *agent.Client {
	tb.Helper()
	srv := daemon.New()
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, a)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

func TestDeadlineCoversTheExchange(t *testing.T) {
	c := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sleep", "30"}})
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want deadline_exceeded", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %s", el)
	}
	// The session is still usable.
	if _, err := c.Hello(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDoneWhenPipeDrops(t *testing.T) {
	srv := daemon.New()
	defer srv.Close()
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	b.Close() // the exec pipe drops
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the pipe dropped")
	}
	_, err = c.Hello(context.Background())
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "reconnect") {
		t.Fatalf("err = %v", err)
	}
}

func TestVersionMismatchIsRefused(t *testing.T) {
	a, b := net.Pipe()
	go fakeOldAgent(b)
	_, err := agent.NewClient(context.Background(), a)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "version") {
		t.Fatalf("err = %v", err)
	}
}

// An agent from before fencing is not asked to claim: it would not know
// the op, and the caller learns what to do instead.
func TestClaimNeedsAFencingAgent(t *testing.T) {
	a, b := net.Pipe()
	go fakeAgent(b, proto.HelloResponse{Version: proto.Version, PID: 42})
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Claim(context.Background(), "replica-0", 1)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "predates fencing") {
		t.Fatalf("claim on an agent without fencing = %v, want failed_precondition", err)
	}
}

// BenchmarkReadFile4K measures one 4 KiB ReadFile round trip over an
// in-memory pipe: the agent protocol's per-request overhead.
func BenchmarkReadFile4K(b *testing.B) {
	c := pair(b)
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := &proto.ReadFileRequest{Root: root, Path: "f"}
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.ReadFile(ctx, req)
		if err != nil || len(r.Data) != 4096 {
			b.Fatal(err)
		}
	}
}
