package agent_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// synCounter counts the streams a client opens by reading the yamux frame
// headers it writes (12 bytes: version, type, flags, stream id, length; a
// data frame's body follows).
type synCounter struct {
	net.Conn
	mu   sync.Mutex // guards buf and syns
	buf  []byte
	syns int
}

func (c *synCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf = append(c.buf, p...)
	for len(c.buf) >= 12 {
		typ, flags, n := c.buf[1], binary.BigEndian.Uint16(c.buf[2:4]), int(binary.BigEndian.Uint32(c.buf[8:12]))
		body := 0
		if typ == 0 { // data
			body = n
		}
		if len(c.buf) < 12+body {
			break
		}
		if flags&1 != 0 { // SYN
			c.syns++
		}
		c.buf = c.buf[12+body:]
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *synCounter) opened() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syns
}

func countedPair(t *testing.T) (*agent.Client, *synCounter) {
	t.Helper()
	srv := daemon.New()
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	counted := &synCounter{Conn: a}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(ctx, counted)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c, counted
}

// Calls one after another of the file ops share one stream, failed ones
// (a missing file) included; an exec still gets a stream of its own.
func TestFileCallsShareOneStream(t *testing.T) {
	c, counted := countedPair(t)
	root := t.TempDir()
	ctx := context.Background()
	before := counted.opened() // the hello's
	for i := range 10 {
		data := []byte{'v', byte('0' + i)}
		if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "f.txt", Data: data}}}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "f.txt"})
		if err != nil || string(got.Data) != string(data) {
			t.Fatalf("read %d: %q, %v; want %q", i, got.Data, err, data)
		}
		if _, err := c.Stat(ctx, &proto.StatRequest{Root: root, Path: "missing.txt"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("stat of a missing file: %v, want not found", err)
		}
	}
	if n := counted.opened() - before; n != 1 {
		t.Fatalf("30 file calls in turn opened %d streams, want 1", n)
	}
	if _, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if n := counted.opened() - before; n != 2 {
		t.Fatalf("after an exec %d streams were opened, want 2 (an exec never reuses one)", n)
	}
}

// Concurrent calls each get a stream; afterwards at most the pool's worth
// stay, and every response belongs to its own request.
func TestConcurrentFileCallsKeepTheirAnswers(t *testing.T) {
	c, _ := countedPair(t)
	root := t.TempDir()
	for i := range 16 {
		os.WriteFile(filepath.Join(root, string(rune('a'+i))), []byte{byte('a' + i)}, 0o644)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16*20)
	for i := range 16 {
		wg.Go(func() {
			name := string(rune('a' + i))
			for range 20 {
				got, err := c.ReadFile(context.Background(), &proto.ReadFileRequest{Root: root, Path: name})
				if err != nil {
					errs <- err
					return
				}
				if string(got.Data) != name {
					errs <- errors.New("read " + name + " answered " + string(got.Data))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A call cancelled before it starts gives its kept stream up rather than
// leaving it half used; the next call works.
func TestCancelledCallDoesNotPoisonThePool(t *testing.T) {
	c, _ := countedPair(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644)
	ctx := context.Background()
	if _, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "f"}); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.ReadFile(done, &proto.ReadFileRequest{Root: root, Path: "f"}); err == nil {
		t.Fatalf("cancelled read: %v", err)
	}
	got, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "f"})
	if err != nil || string(got.Data) != "x" {
		t.Fatalf("read after a cancelled one: %q, %v", got.Data, err)
	}
}
