package daemon

import (
	"context"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const defaultDialTimeout = 10 * time.Second

// dialService connects the client to sockets inside the sandbox (op dial):
// a unix socket or a loopback TCP port, spliced to the request's stream.
// It keeps no state. Goroutines: each dial's splice, on its request's
// goroutine, waits for one copier per direction; they end when both
// directions have ended, or either fails (the session dropping).
type dialService struct{}

var _ service = dialService{}

func (dialService) register(t opTable) {
	addBody(t, proto.OpDial, func(r *proto.Request) *proto.DialRequest { return r.Dial },
		func(ctx context.Context, rq *request, r *proto.DialRequest) (*proto.Response, func(), error) {
			run, err := dial(ctx, r, rq.st)
			return &proto.Response{}, run, err
		})
}

// dial connects to a unix socket or a loopback TCP port and returns the
// splice to run once the response is out.
func dial(ctx context.Context, r *proto.DialRequest, st *yamux.Stream) (func(), error) {
	switch r.Network {
	case "unix":
		if r.Address == "" {
			return nil, errdefs.InvalidArgument("dial has no address; give the socket's path")
		}
	case "tcp", "tcp4", "tcp6":
		host, _, err := net.SplitHostPort(r.Address)
		if err != nil {
			return nil, errdefs.InvalidArgument("address %q is not host:port (%v); give e.g. 127.0.0.1:5678", r.Address, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, errdefs.InvalidArgument("address %q is not on the loopback interface; the agent dials only 127.0.0.1, ::1 or localhost", r.Address)
		}
	default:
		return nil, errdefs.InvalidArgument("network %q is not supported; use \"unix\" or \"tcp\" (loopback only)", r.Network)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, r.Network, r.Address)
	if err != nil {
		if dctx.Err() != nil {
			return nil, errdefs.DeadlineExceeded("dialing %s %s did not succeed within %s; check that the server is up", r.Network, r.Address, timeout)
		}
		return nil, errdefs.Unavailable("cannot connect to %s %s: %v; check that the server is listening", r.Network, r.Address, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			c = &quickAckConn{Conn: tc, tc: tc, rc: rc}
		}
	}
	return func() { splice(st, c) }, nil
}

// quickAckConn acknowledges what it reads at once. A server that writes a
// response in two small writes (headers, then body: Python's http.server,
// many others) with Nagle's algorithm on waits for the first write's
// acknowledgement before sending the second, and a receiver that only
// reads (this end, relaying to the pipe) delays it by up to 40 ms: every
// such response through the pipe would take 40 ms. Linux clears
// TCP_QUICKACK as it goes, so it is set again before each read.
//
// It holds the connection as a net.Conn, not by embedding *net.TCPConn:
// that would lend it TCPConn's ReadFrom and WriteTo, which io.Copy (splice)
// prefers, and which read and write without passing through these methods.
type quickAckConn struct {
	net.Conn
	tc *net.TCPConn
	rc syscall.RawConn
}

func (q *quickAckConn) Read(p []byte) (int, error) {
	q.quickAck()
	n, err := q.tc.Read(p)
	if n > 0 {
		q.quickAck()
	}
	return n, err
}

// Write sets it again after writing too: a request written and a response
// read make the kernel take the connection for an interactive one, which
// delays acknowledgements to carry them on the next write.
func (q *quickAckConn) Write(p []byte) (int, error) {
	n, err := q.tc.Write(p)
	q.quickAck()
	return n, err
}

func (q *quickAckConn) quickAck() {
	q.rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1) })
}

// CloseWrite passes the half-close on (splice uses it).
func (q *quickAckConn) CloseWrite() error { return q.tc.CloseWrite() }

// splice copies both ways until both directions end; the end of one
// direction is passed on as a half-close where the connection allows it.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if ys, ok := src.(*yamux.Stream); ok && ys.Session().IsClosed() {
			err = io.ErrClosedPipe // the session dropped: nobody will read on
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
			return
		}
		if ys, ok := dst.(*yamux.Stream); ok && err == nil {
			ys.Close() // a yamux Close is a half-close: it only ends our writes
			return
		}
		// An error in one direction ends both.
		a.Close()
		b.Close()
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
