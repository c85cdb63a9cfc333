package daemon_test

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

func TestDialUnixSplicesBothWays(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	sock := filepath.Join(t.TempDir(), "echo.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		b, _ := io.ReadAll(conn) // until the client's half-close
		conn.Write(append([]byte("echo:"), b...))
	}()
	conn, err := c.Dial(ctx, &proto.DialRequest{Network: "unix", Address: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write([]byte("ping"))
	conn.Close() // half-close: the server sees EOF and responds
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "echo:ping" {
		t.Fatalf("got %q", got)
	}
}

func TestDialRefusals(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	cases := []struct {
		req   proto.DialRequest
		class error
	}{
		{proto.DialRequest{Network: "tcp", Address: "10.0.0.1:80"}, errdefs.ErrInvalidArgument},
		{proto.DialRequest{Network: "tcp", Address: "example.com:80"}, errdefs.ErrInvalidArgument},
		{proto.DialRequest{Network: "udp", Address: "127.0.0.1:53"}, errdefs.ErrInvalidArgument},
		{proto.DialRequest{Network: "unix", Address: filepath.Join(t.TempDir(), "none.sock")}, errdefs.ErrUnavailable},
	}
	for _, tc := range cases {
		if _, err := c.Dial(ctx, &tc.req); !errors.Is(err, tc.class) {
			t.Errorf("dial %+v: %v, want %v", tc.req, err, tc.class)
		}
	}
}
