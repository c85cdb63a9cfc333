package agent_test

import (
	"bytes"
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

// An agent from before sandbox environments is not sent set_env: it would
// reject it as an unknown op, and the caller learns what to do instead.
func TestSetEnvNeedsAnAgentThatTakesIt(t *testing.T) {
	a, b := net.Pipe()
	go fakeAgent(b, proto.HelloResponse{Version: proto.Version, PID: 42, Fencing: true})
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.SetEnv(context.Background(), map[string]string{"FOO": "bar"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "predates setting a sandbox's environment") {
		t.Fatalf("set_env on an agent without it = %v, want failed_precondition", err)
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

func TestRawFramesCarryBinaryFiles(t *testing.T) {
	c := pair(t)
	ctx := context.Background()
	root := t.TempDir()
	all := make([]byte, 256*3)
	for i := range all {
		all[i] = byte(i)
	}
	err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "bin", Data: all}, {Path: "empty", Data: []byte{}}, {Path: "dir/x", Data: []byte("x"), MkdirAll: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "bin")); !bytes.Equal(got, all) {
		t.Fatalf("written file has %d bytes, want the %d sent", len(got), len(all))
	}
	r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "bin"})
	if err != nil || !bytes.Equal(r.Data, all) || r.Size != int64(len(all)) {
		t.Fatalf("read back: %v, %d bytes", err, len(r.Data))
	}
	e, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "empty"})
	if err != nil || len(e.Data) != 0 || e.Size != 0 {
		t.Fatalf("empty file: %v, %+v", err, e)
	}
	rs, err := c.ReadFiles(ctx, &proto.ReadFilesRequest{Root: root, Paths: []string{"dir/x", "missing", "bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if f := rs.Files; len(f) != 3 || string(f[0].Data) != "x" || f[1].Skipped != "not found" || f[1].Data != nil || !bytes.Equal(f[2].Data, all) {
		t.Fatalf("read_files: %+v", rs.Files)
	}
	err = c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "bin", Delete: true}, {Path: "new", Data: []byte("n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin")); !os.IsNotExist(err) {
		t.Fatalf("deleted file: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "new")); string(got) != "n" {
		t.Fatalf("new file %q", got)
	}
}

func TestOldAgentGetsJSONRequests(t *testing.T) {
	a, b := net.Pipe()
	sawRaw := make(chan bool, 1)
	go fakeJSONAgent(b, []byte("from an old agent"), sawRaw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: "/w", Path: "a"})
	if err != nil || string(r.Data) != "from an old agent" {
		t.Fatalf("read from an old agent: %v, %+v", err, r)
	}
	if <-sawRaw {
		t.Fatal("the client asked an agent that does not advertise raw frames for them")
	}
}
